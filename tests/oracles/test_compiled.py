"""`model.compile` computes the same model as eager PyTorch: the same loss, the same gradient for every parameter and
the same greedy and beam translations, in float64 (Inductor's CPU code keeps float64), for every variant the
throughput benchmark times; and the compiled step neither breaks its graph nor recompiles per batch.

Compiling is slow on a CPU (tens of seconds per variant), so the fast suite covers the baseline and SACT, and the
`slow` suite one variant per code path of the step (all 15 passed once, in 30 minutes on a loaded 2-core machine).

`model.compile: graphs` compiles nothing; on a CPU it runs the step a CUDA graph would capture, eagerly: the
static-shape step over batches padded to their length bucket gives the eager step's loss, gradients, dev loss and
translations for every variant of the family (tests/oracles/test_fast_path.py's). tests/oracles/test_device_path.py
holds the captured step itself to the same on CUDA."""

import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from nmt_core.data.batches import Example, collate
from nmt_core.training.compiled import compile_seconds
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.graphs import DecoderLoss, decoder_loss_inputs
from nmt_core.training.train import batch_loss, build_model, dev_pass, symmetric_loss, trial_loss
from tests.conftest import COMPILES, FEW_PAIRS, tiny_config
from tests.oracles.test_fast_path import VARIANTS as FAMILY
from tests.oracles.test_fast_path import _batch as family_batch

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from throughput import VARIANTS  # noqa: E402

SRC_VOCAB, TGT_VOCAB = 30, 20
FAST = ("none", "sact")
# one variant per code path the step compiles through (plain ops, the gate, the second transition, the coverage state,
# the step's self-attention); CI's time keeps the other eight benchmarked variants, which share those paths, out
SLOW = ("plain", "sentinel", "cgru", "fertility", "self_attention")


def _batch(lengths: tuple[tuple[int, int], ...], seed: int, bucket: int = 0):
    g = torch.Generator().manual_seed(seed)
    examples = []
    for src_len, tgt_len in lengths:
        src = torch.randint(4, SRC_VOCAB, (src_len,), generator=g).tolist()
        tgt = torch.randint(4, TGT_VOCAB, (tgt_len,), generator=g).tolist()
        examples.append(Example(src, tgt, [(min(i, src_len - 1), i) for i in range(tgt_len)]))
    return collate(examples, list(range(len(examples))), bucket)


# batches of other sizes, source lengths and target lengths: each must reuse the graphs the first one compiled
BATCHES = (((7, 6), (3, 2), (5, 4), (2, 1)), ((4, 5), (9, 8), (2, 3)), ((6, 2), (3, 7), (8, 4), (5, 5), (2, 2)))


def _models(name: str, mode: str):
    sections = VARIANTS[name]
    cfg = tiny_config(**{**sections, "model": {**sections.get("model", {}), "dropout": 0.0, "compile": mode}})
    torch.manual_seed(0)
    model = build_model(cfg, SRC_VOCAB, TGT_VOCAB).double()
    reverse = None
    if cfg.train.symmetry_weight > 0:
        torch.manual_seed(1)
        reverse = build_model(cfg, TGT_VOCAB, SRC_VOCAB).double()
    return cfg, model, reverse


def _losses_and_grads(cfg, model, reverse, bucket: int) -> list[tuple[torch.Tensor, list[torch.Tensor | None]]]:
    modules = [model] if reverse is None else [model, reverse]
    parameters = [p for m in modules for p in m.parameters()]
    results = []
    for i, lengths in enumerate(BATCHES):
        batch = _batch(lengths, i, bucket)
        loss = batch_loss(model, batch, cfg)[0] if reverse is None else symmetric_loss(model, reverse, batch, cfg)
        results.append((loss.detach(), list(torch.autograd.grad(loss, parameters, allow_unused=True))))
    return results


def _translations(cfg, model, bucket: int = 0) -> list:
    model.eval()
    return [
        decode(model, _batch(lengths, i, bucket), cfg.decode)
        for decode in (greedy, lambda m, b, c: beam_search(m, b, c, 3))
        for i, lengths in enumerate(BATCHES[:2])
    ]


def _run(name: str, mode: str, bucket: int = 0) -> tuple[list, list]:
    cfg, model, reverse = _models(name, mode)
    return _losses_and_grads(cfg, model, reverse, bucket), _translations(cfg, model, bucket)


@pytest.fixture(autouse=True)
def _recompiling_past_the_limit_fails():
    """Past Dynamo's recompile limit the step would fall back to eager with a warning: here it is an error."""
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        yield


def _check_same_model(name: str, mode: str = "default") -> None:
    """Eager on batches padded to their longest, compiled on batches padded to length buckets 4 tokens wide."""
    torch._dynamo.reset()
    counters.clear()
    eager_train, eager_decoded = _run(name, "none")
    assert not counters["stats"], "eager ran through Dynamo"
    compiled_train, compiled_decoded = _run(name, mode, bucket=4)
    assert not counters["graph_break"], dict(counters["graph_break"])
    for (eager_loss, eager_grads), (loss, grads) in zip(eager_train, compiled_train):
        assert torch.allclose(loss, eager_loss, rtol=1e-10, atol=1e-12), (loss.item(), eager_loss.item())
        for eager, compiled in zip(eager_grads, grads):
            assert (eager is None) == (compiled is None)
            if eager is not None:
                assert torch.allclose(compiled, eager, rtol=1e-8, atol=1e-12), (compiled - eager).abs().max().item()
    for eager, compiled in zip(eager_decoded, compiled_decoded):
        for e, c in zip(eager, compiled):
            assert c.tokens == e.tokens
            assert abs(c.score - e.score) < 1e-9
            assert torch.allclose(c.weights, e.weights, atol=1e-9)


@COMPILES
@pytest.mark.parametrize("name", FAST)
def test_the_compiled_step_computes_the_eager_models_loss_gradients_and_translations(name):
    _check_same_model(name)


@COMPILES
@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_every_benchmarked_variant_compiles_to_the_same_model(name):
    _check_same_model(name)


@COMPILES
@pytest.mark.slow
def test_reduce_overhead_computes_the_same_model():
    """`reduce-overhead`'s static-shape step (the masked loss over every position; its no-grad outputs copied out of
    the graphs' memory), which on a CPU compiles without CUDA graphs."""
    _check_same_model("sact", "reduce-overhead")


@COMPILES
def test_a_trial_compiles_a_handful_of_graphs_not_one_per_batch():
    """Training's graphs (the first step, whose state needs no gradient, and the others; the loss) are all compiled
    by the first batch: batches of other shapes reuse them. Decoding adds one graph each for greedy and beam."""
    torch._dynamo.reset()
    counters.clear()
    before = compile_seconds()
    cfg, model, _ = _models("sact", "default")
    for i, lengths in enumerate(BATCHES):
        batch_loss(model, _batch(lengths, i), cfg)[0].backward()
        if i == 0:
            after_first = counters["stats"]["unique_graphs"]
    assert counters["stats"]["unique_graphs"] == after_first <= 4
    _translations(cfg, model)  # greedy's first step (its state holds views of s_0) and the others, beam's
    assert counters["stats"]["unique_graphs"] <= after_first + 3
    assert not counters["graph_break"], dict(counters["graph_break"])
    assert compile_seconds() - before > 0


@COMPILES
def test_sizes_equal_by_chance_in_the_first_batch_do_not_tie_later_graphs():
    """The first batch has as many rows as emb_size (16) and sources one token longer than the targets, so as long
    as the decoder's input: later batches without those coincidences must reuse its graphs. Dynamo's duck shaping
    gave equal sizes one symbol, and the quickstart (batch 64, emb_size 64) compiled its step past the recompile
    limit."""
    torch._dynamo.reset()
    counters.clear()
    cfg, model, _ = _models("none", "default")
    assert cfg.model.emb_size == 16
    batch_loss(model, _batch(((7, 6),) * 16, 0), cfg)[0].backward()
    batch_loss(model, _batch(((7, 6),) * 16, 1), cfg)[0].backward()  # the second step's graph (state with grad)
    after_first = counters["stats"]["unique_graphs"]
    for i, lengths in enumerate(BATCHES):
        batch_loss(model, _batch(lengths, i), cfg)[0].backward()
    assert counters["stats"]["unique_graphs"] == after_first


@COMPILES
@pytest.mark.slow
def test_a_compiled_trial_trains_like_the_eager_one_and_reports_its_compile_time_once():
    """The trial's loop (train, dev loss, greedy dev BLEU, beam test BLEU) through the compiled step: the same epoch
    losses as eager in float32 (dropout 0; within 1e-4), and the compile seconds reported once, at the end."""
    from nmt_core.training.train import train

    results = {
        mode: train(tiny_config(model={"compile": mode}, train={"epochs": 2}, data=FEW_PAIRS), log=lambda _: None)
        for mode in ("none", "default")
    }
    eager, compiled = results["none"], results["default"]
    for e, c in zip(eager.history, compiled.history):
        assert abs(e["train_loss"] - c["train_loss"]) < 1e-4 and abs(e["dev_loss"] - c["dev_loss"]) < 1e-4
    assert compiled.final["compile_time_s"] > 0 and "compile_time_s" not in eager.final
    assert all("compile_time_s" not in report for report in compiled.history)


BUCKET = 5  # family_batch's longest pair (7, 6 + </s>) pads to 10 x 10: padding on both sides


def _family_models(sections: dict, mode: str):
    buckets = {"buckets": 10} if mode == "graphs" else {}  # what `graphs` asks of a trial (batches here: collate's)
    model = {**sections.get("model", {}), "compile": mode}
    cfg = tiny_config(**{**sections, "model": model, "train": {**sections.get("train", {}), **buckets}})
    torch.manual_seed(0)
    models = [build_model(cfg, SRC_VOCAB, TGT_VOCAB).double()]
    if cfg.train.symmetry_weight > 0:
        torch.manual_seed(1)
        models.append(build_model(cfg, TGT_VOCAB, SRC_VOCAB).double())
    return cfg, models


def _named_grads(loss: torch.Tensor, models: list) -> dict[str, torch.Tensor | None]:
    named = [(f"{i}.{name}", p) for i, m in enumerate(models) for name, p in m.named_parameters()]
    return dict(zip([n for n, _ in named], torch.autograd.grad(loss, [p for _, p in named], allow_unused=True)))


@pytest.mark.parametrize("name", FAMILY)
def test_the_captured_half_of_a_step_gives_the_eager_loss_and_gradients_on_bucket_padded_batches(name):
    """What CapturedLoss records on CUDA (the encoders eagerly, then DecoderLoss: decoder and masked loss over every
    position of the bucket), run eagerly on a batch padded to its bucket: the eager step's loss and gradients."""
    cfg, models = _family_models(FAMILY[name], "none")
    eager_loss = trial_loss(cfg)(family_batch(), *models)
    eager = _named_grads(eager_loss, models)
    cfg, models = _family_models(FAMILY[name], "graphs")
    padded = family_batch(BUCKET)
    assert padded.src.size(1) > family_batch().src.size(1) and padded.tgt_out.size(1) > family_batch().tgt_out.size(1)
    inputs, aligned = decoder_loss_inputs(models, padded)
    loss = DecoderLoss(trial_loss(cfg), models, aligned)(*inputs)
    assert torch.allclose(loss, eager_loss, rtol=1e-10, atol=1e-12), (loss.item(), eager_loss.item())
    grads = _named_grads(loss, models)
    assert grads.keys() == eager.keys()
    for key, expected in eager.items():
        assert (expected is None) == (grads[key] is None), key
        if expected is not None:
            assert torch.allclose(grads[key], expected, rtol=1e-8, atol=1e-12), key


@pytest.mark.parametrize("name", [n for n in FAMILY if "train" not in FAMILY[n]])
def test_bucket_padded_batches_give_the_eager_dev_loss_and_translations(name):
    """The no-grad loops a CUDA graph replays step by step (dev loss, greedy, beam), on a batch padded to its
    bucket under `model.compile: graphs`: the eager results on the unpadded batch."""
    results = []
    for mode, batch in (("none", family_batch()), ("graphs", family_batch(BUCKET))):
        cfg, (model,) = _family_models(FAMILY[name], mode)
        model.eval()
        dev = dev_pass(model, [batch], cfg, torch.device("cpu"))
        results.append((dev, greedy(model, batch, cfg.decode), beam_search(model, batch, cfg.decode, 3)))
    (eager_dev, *eager_decoded), (dev, *decoded) = results
    assert dev.keys() == eager_dev.keys()
    assert dev["dev_loss"] == pytest.approx(eager_dev["dev_loss"], rel=1e-10)
    for key, value in eager_dev.items():  # the diagnostics are summed in float32 (nmt_core.training.diagnostics)
        assert dev[key] == pytest.approx(value, rel=1e-6, abs=1e-9, nan_ok=True), key
    for eager, padded in zip(eager_decoded, decoded):
        for e, p in zip(eager, padded):
            assert p.tokens == e.tokens
            assert abs(p.score - e.score) < 1e-9
            assert torch.allclose(p.weights, e.weights, atol=1e-9)


@pytest.mark.parametrize("name", [n for n in FAMILY if "train" not in FAMILY[n]])
def test_the_captured_beam_step_gives_the_eager_searchs_translations_bit_for_bit(name):
    """Beam search under `model.compile: graphs` runs every step through the model's beam_step (on CUDA replayed
    from one graph per batch shape: the decoder step, scores, top-k, finished hypotheses and the reordering of the
    state), here eagerly: the eager search's tokens, scores and traces exactly, at beam 10 and 3."""
    results = []
    for mode in ("none", "graphs"):
        cfg, (model,) = _family_models(FAMILY[name], mode)
        model.eval()
        calls = []
        if mode == "graphs":
            captured = model.beam_step
            model.beam_step = lambda *args, calls=calls, captured=captured: calls.append(1) or captured(*args)
        results.append([beam_search(model, family_batch(), cfg.decode, k) for k in (10, 3)])
        assert bool(calls) == (mode == "graphs")
    for eager, captured in zip(*results):
        for e, c in zip(eager, captured):
            assert c.tokens == e.tokens and c.score == e.score and torch.equal(c.weights, e.weights)
            assert c.tau == e.tau and c.gate == e.gate


def test_graphs_without_length_buckets_is_refused_in_one_line():
    """A CUDA graph replays one batch shape: `model.compile: graphs` without train.buckets would capture nearly every
    batch anew, so the config says so before anything runs."""
    from nmt_core.config import ConfigError

    with pytest.raises(ConfigError, match=r"train\.buckets: must be > 0 with model\.compile graphs"):
        tiny_config(model={"compile": "graphs"})
    assert tiny_config(model={"compile": "graphs"}, train={"buckets": 5}).train.buckets == 5
