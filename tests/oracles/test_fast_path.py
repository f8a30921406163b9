"""The fast path (`model.fast_path`, on by default) computes the same model as the plain one: for every attention
variant, the same loss, the same gradient for every parameter and the same greedy and beam translations, in
float64 so that only summation order may differ; `model.fast_path: false` really runs the plain path. Beam search's
hypotheses share their sentence's encoder memory and attend exactly as copies of it would."""

import pytest
import torch

from nmt_core.data.batches import Example, collate
from nmt_core.models.attention import Memory
from nmt_core.models.rnn import Seq2Seq
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.train import batch_loss, symmetric_loss
from tests.conftest import tiny_config
from tests.oracles.test_attention import SCORES_UNDER_TEST, TEMPERATURES_UNDER_TEST
from tests.oracles.test_attention_family import FAMILY

SRC_VOCAB, TGT_VOCAB = 30, 20


def _variants() -> dict[str, dict]:
    """Every score x temperature x sentinel (Luong placement), every other member of the family, the other cells,
    depths and losses: config sections over the tiny defaults."""
    variants = {}
    for score in SCORES_UNDER_TEST:
        for temperature in TEMPERATURES_UNDER_TEST:
            for sentinel in (False, True):
                if sentinel and score == "key_value":
                    continue  # refused by the config
                variants[f"{score}-{temperature}{'-sentinel' if sentinel else ''}"] = {
                    "attention": {"score": score, "temperature": temperature, "tau": 0.8, "sentinel": sentinel}
                }
    for name, (attention, model) in FAMILY.items():
        score = "concat" if name == "fertility" else "general"
        variants[name] = {"attention": {**attention, "score": score}, "model": model}
    variants.update(
        {
            "gru": {"model": {"cell": "gru"}},
            "gru-sentinel-sact": {"model": {"cell": "gru"}, "attention": {"sentinel": True, "temperature": "sact"}},
            "two-layers": {"model": {"decoder_layers": 2, "encoder_layers": 2}},
            "bahdanau-gru-two-layers": {
                "model": {"cell": "gru", "decoder_layers": 2},
                "attention": {"placement": "bahdanau"},
            },
            "no-input-feeding": {"model": {"input_feeding": False}},
            "no-input-feeding-sentinel": {"model": {"input_feeding": False}, "attention": {"sentinel": True}},
            "coverage": {"attention": {"score": "concat", "coverage": True, "coverage_weight": 0.5}},
            # a corpus with gold alignments: the config is then valid without eflomal (the GPU image lacks it)
            "guided": {"data": {"corpus": "bible-grc-en", "tokenizer": "space"}, "train": {"guided_alignment": 0.5}},
            "symmetry": {"train": {"symmetry_weight": 1.0}},
            "label-smoothing": {"train": {"label_smoothing": 0.1}},
            # the mechanisms after SACT (issue 72)
            "sact-base": {"attention": {"temperature": "sact", "sact_base": True}},
            "sact-released": {
                "model": {"input_feeding": False, "encoder_merge": "sum"},
                "attention": {"temperature": "sact_released"},
            },
            "ssmax": {"attention": {"temperature": "ssmax"}},
            "ssmax-fixed-sentinel": {"attention": {"temperature": "ssmax_fixed", "sentinel": True}},
            "selective": {"attention": {"temperature": "selective"}},
            "softcap": {"attention": {"temperature": "fixed", "tau": 0.2, "softcap": True, "cap": 2.0}},
            "entmax": {"attention": {"normaliser": "entmax"}},
            "entmax-learned-sentinel": {"attention": {"normaliser": "entmax_learned", "sentinel": True}},
            "entropy-sharpening": {"attention": {"entropy_sharpening": True, "entropy_threshold": 0.2}},
        }
    )
    return variants


VARIANTS = _variants()


def _batch(bucket: int = 0):
    """Sources and targets of different lengths, so that the targets have padding (`bucket`: padded further, to
    multiples of that many tokens, as length buckets pad them)."""
    g = torch.Generator().manual_seed(0)
    examples = []
    for src_len, tgt_len in ((7, 6), (3, 2), (5, 4), (1, 1)):
        src = torch.randint(4, SRC_VOCAB, (src_len,), generator=g).tolist()
        tgt = torch.randint(4, TGT_VOCAB, (tgt_len,), generator=g).tolist()
        links = [(min(i, src_len - 1), i) for i in range(tgt_len)]
        examples.append(Example(src, tgt, links))
    return collate(examples, list(range(len(examples))), bucket)


def _models(sections: dict, fast: bool):
    cfg = tiny_config(**{**sections, "model": {**sections.get("model", {}), "fast_path": fast}})
    torch.manual_seed(0)
    model = Seq2Seq(cfg.model, cfg.attention, SRC_VOCAB, TGT_VOCAB).double()
    reverse = None
    if cfg.train.symmetry_weight > 0:
        torch.manual_seed(1)
        reverse = Seq2Seq(cfg.model, cfg.attention, TGT_VOCAB, SRC_VOCAB).double()
    return cfg, model, reverse


def _loss_and_grads(sections: dict, fast: bool):
    cfg, model, reverse = _models(sections, fast)
    batch = _batch()
    loss = batch_loss(model, batch, cfg)[0] if reverse is None else symmetric_loss(model, reverse, batch, cfg)
    modules = [model] if reverse is None else [model, reverse]
    parameters = [(f"{i}.{name}", p) for i, m in enumerate(modules) for name, p in m.named_parameters()]
    grads = torch.autograd.grad(loss, [p for _, p in parameters], allow_unused=True)
    return loss, {name: g for (name, _), g in zip(parameters, grads)}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_fast_path_gives_the_plain_paths_loss_and_gradients(name):
    plain_loss, plain_grads = _loss_and_grads(VARIANTS[name], fast=False)
    fast_loss, fast_grads = _loss_and_grads(VARIANTS[name], fast=True)
    assert torch.allclose(fast_loss, plain_loss, rtol=1e-10, atol=1e-12), (fast_loss.item(), plain_loss.item())
    assert fast_grads.keys() == plain_grads.keys()
    for key, plain in plain_grads.items():
        fast = fast_grads[key]
        assert (plain is None) == (fast is None), key
        if plain is not None:
            assert torch.allclose(fast, plain, rtol=1e-8, atol=1e-12), (key, (fast - plain).abs().max().item())
    assert any(g is not None and g.abs().sum() > 0 for g in fast_grads.values())


@pytest.mark.parametrize("name", [n for n in VARIANTS if "train" not in VARIANTS[n]])
def test_the_fast_path_decodes_the_same_translations(name):
    batch = _batch()
    decoded = {}
    for fast in (False, True):
        cfg, model, _ = _models(VARIANTS[name], fast)
        model.eval()
        decoded[fast] = [greedy(model, batch, cfg.decode), beam_search(model, batch, cfg.decode, 3)]
    for plain, fast in zip(*decoded.values()):
        for p, f in zip(plain, fast):
            assert p.tokens == f.tokens
            assert abs(p.score - f.score) < 1e-9
            assert torch.allclose(p.weights, f.weights, atol=1e-9)


@pytest.mark.parametrize("name", [n for n in VARIANTS if "train" not in VARIANTS[n]])
def test_hypotheses_sharing_their_sentences_memory_attend_as_copies_of_it_would(name):
    cfg, model, _ = _models(VARIANTS[name], fast=True)
    model.eval()
    batch, k = _batch(), 3
    memory, state = model.encode(batch.src, batch.src_lengths)
    rows = torch.arange(batch.src.size(0)).repeat_interleave(k)
    copies = Memory(memory.values[rows], memory.keys[rows], memory.mask[rows])
    shared_state = copied_state = state.select(rows)
    for step in range(3):  # every row its own previous word, so that the hypotheses of a sentence differ
        y = torch.randint(4, TGT_VOCAB, (rows.numel(),), generator=torch.Generator().manual_seed(step))
        shared_logits, shared_state, shared = model.decoder.step(y, shared_state, memory.for_hypotheses(k))
        copied_logits, copied_state, copied = model.decoder.step(y, copied_state, copies)
        assert torch.allclose(shared_logits, copied_logits, rtol=1e-10, atol=1e-12)
        for part in ("context", "weights", "tau", "gate", "scores"):
            a, b = getattr(shared, part), getattr(copied, part)
            assert (a is None) == (b is None), part
            assert a is None or torch.allclose(a, b, rtol=1e-10, atol=1e-12), part


def test_fast_path_false_runs_the_plain_path():
    """With the switch off, the decoder's nn.LSTM module runs once per target step and the loss reads logits at
    every position, padding included; with it on, the module is never called and padding gets no logits."""
    batch = _batch()
    for fast, rnn_calls, logit_rows in ((False, batch.tgt_in.size(1), batch.tgt_in.numel()), (True, 0, batch.n_tokens)):
        cfg, model, _ = _models({}, fast)
        calls, rows = [], []
        model.decoder.rnn.register_forward_hook(lambda *args: calls.append(1))  # noqa: B023 (this iteration's lists)
        model.decoder.output.register_forward_hook(lambda module, args, out: rows.append(out.shape[:-1].numel()))  # noqa: B023
        batch_loss(model, batch, cfg)
        assert (len(calls), rows) == (rnn_calls, [logit_rows])
