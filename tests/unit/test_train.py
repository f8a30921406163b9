"""Training end to end on the generated corpus: learning, exact resume, decoding and traces."""

import math

import pytest
import torch

from nmt_core.data.batches import make_batches
from nmt_core.training.decode import beam_search, greedy
from nmt_core.training.evaluate import corpus_bleu, trace_table
from nmt_core.training.train import TrainingDiverged, autocast, native_bf16, train
from tests.conftest import tiny_config

SMALL = {
    "model": {"emb_size": 32, "hidden_size": 64},
    "train": {"epochs": 2, "batch_size": 32, "lr": 5e-3},
    "data": {"train_subset": 1500, "eval_subset": 100},
}


def _cfg(attention=None, **sections):
    """SMALL, with some keys of some sections replaced."""
    merged = {name: {**SMALL.get(name, {}), **sections.get(name, {})} for name in {*SMALL, *sections}}
    return tiny_config(**merged, attention=attention or {})


def _quiet(_):
    pass


@pytest.mark.parametrize(
    "attention, epochs",
    [({}, 2), ({"temperature": "fixed", "tau": 1.2}, 2), ({"temperature": "sact"}, 2), ({"sentinel": True}, 4)],
)
def test_training_beats_copying_the_source(attention, epochs):
    """The paper's LSTM sentinel (memory cell, eq. 12 readout) starts with its gate stuck open (beta ~ 0.99 for
    two epochs here) before it attends: it gets 4 epochs (measured: 51.7 BLEU; 85.4 after 8, the baseline 99.0)."""
    result = train(_cfg(attention, train={"epochs": epochs}), log=_quiet)
    data = result.data
    copy_bleu = corpus_bleu(
        [" ".join(data.src_vocab.decode(e.src)) for e in data.splits["test"]], data.references["test"]
    ).score
    assert result.final["bleu_test_test"] > copy_bleu + 30
    report = result.history[-1]
    assert set(report) >= {"epoch", "train_loss", "dev_loss", "dev_ppl", "bleu_dev", "tokens_per_s", "epoch_time_s"}
    assert ("tau_mean" in report) == ("temperature" in attention)
    assert ("sentinel_mean" in report) == ("sentinel" in attention)
    assert result.history[1]["train_loss"] < result.history[0]["train_loss"]


def test_resume_after_an_epoch_gives_the_same_losses_as_an_uninterrupted_run():
    cfg = _cfg({"temperature": "sact"}, model={"dropout": 0.3}, train={"epochs": 3})
    states = []
    full = train(cfg, on_epoch_end=lambda report, state, best: states.append(state), log=_quiet)
    saved = states[0]
    torch.save(saved, "/tmp/nmt_resume_state.pt")
    restored = torch.load("/tmp/nmt_resume_state.pt", weights_only=True)  # what a real checkpoint goes through
    resumed = train(cfg, resume=restored, log=_quiet)
    for a, b in zip(full.history, resumed.history):
        assert a["train_loss"] == b["train_loss"] and a["dev_loss"] == b["dev_loss"]
    assert len(resumed.history) == 3
    assert resumed.final["bleu_test_test"] == full.final["bleu_test_test"]


def test_a_diverging_run_raises():
    cfg = _cfg(train={"lr": 1e38, "epochs": 1})  # the first update turns weights into inf/NaN (inf is refused)
    with pytest.raises(TrainingDiverged):
        train(cfg, log=_quiet)


TRACED = {"temperature": "sact", "sentinel": True, "lambda": 3.0}


@pytest.fixture(scope="module")
def trained():
    return train(_cfg(TRACED), log=_quiet)


def test_beam_one_is_exactly_greedy(trained):
    model, data = trained.model.eval(), trained.data
    for batch in make_batches(data.splits["dev"], 16)[:4]:
        cfg = _cfg(TRACED).decode
        for g, b in zip(greedy(model, batch, cfg), beam_search(model, batch, cfg, 1)):
            assert g.tokens == b.tokens
            assert torch.equal(g.weights, b.weights)
            assert g.tau == b.tau and g.gate == b.gate


def test_beam_search_finds_at_least_the_greedy_model_score(trained):
    model, data = trained.model.eval(), trained.data
    cfg = _cfg(TRACED).decode
    cfg.length_penalty = 0.0  # raw log-probabilities: a wider beam can only find better ones
    for batch in make_batches(data.splits["dev"], 16)[:3]:
        for g, b in zip(greedy(model, batch, cfg), beam_search(model, batch, cfg, 5)):
            assert b.score >= g.score - 1e-4


def test_traces_have_one_row_per_target_token_and_sact_bounds(trained):
    result = trained.tests["test"]
    words = [trained.data.tgt_vocab.decode(t.tokens) for t in result.translations]
    table = trace_table(result.translations, words)
    assert table.num_rows == sum(len(w) for w in words)
    tau = table.column("tau").to_pylist()
    assert all(1 / 3.0 < t < 3.0 for t in tau)
    gates = table.column("sentinel").to_pylist()
    assert all(0 <= g <= 1 for g in gates)  # a float32 softmax weight rounds to 1.0 when the gate is stuck open
    row = table.slice(0, 1).to_pylist()[0]
    assert math.isclose(sum(row["weights"]) + row["sentinel"], 1.0, abs_tol=1e-4)
    assert row["argmax_src"] == max(range(len(row["weights"])), key=row["weights"].__getitem__)


def test_sentencepiece_subwords_train_resume_and_score_on_detokenised_text(tmp_path):
    cfg = _cfg(data={"tokenizer": "sentencepiece", "subword_vocab": 40}, train={"epochs": 2})
    states = []
    full = train(cfg, on_epoch_end=lambda report, state, best: states.append(state), log=_quiet)
    data = full.data
    assert data.tgt_segmenter.model is not None and states[0]["subword"]["tgt"] == data.tgt_segmenter.model
    pieces = data.tgt_segmenter.tokenize("la NOUN3 le NOUN5 VERB2 ga")
    assert (
        any(p.startswith("▁") for p in pieces) and data.tgt_segmenter.detokenize(pieces) == "la NOUN3 le NOUN5 VERB2 ga"
    )
    assert data.references["test"][0] == data.corpus.splits["test"][0][1]  # BLEU reads text, not pieces
    assert full.final["bleu_test_test"] > 20
    torch.save(states[0], tmp_path / "state.pt")
    resumed = train(cfg, resume=torch.load(tmp_path / "state.pt", weights_only=True), log=_quiet)
    assert resumed.history[1]["train_loss"] == full.history[1]["train_loss"]


@pytest.mark.parametrize(
    "attention, model",
    [
        ({"score": "concat", "temperature": "sact", "sentinel": True, "coverage": True, "coverage_weight": 0.5}, {}),
        ({"score": "key_value", "temperature": "sact"}, {}),
        ({"score": "concat", "temperature": "fixed", "tau": 0.8}, {"input_feeding": False}),
        ({}, {"cell": "gru"}),
    ],
)
def test_bf16_autocast_trains_and_decodes_every_path(attention, model):
    """train.amp on a bf16 CPU takes the same mixed-precision path as on a GPU, so CI catches dtype mismatches;
    on a CPU without native bf16 it says so once and trains in fp32."""
    cfg = _cfg(attention, train={"amp": True, "epochs": 1}, model=model)
    lines = []
    result = train(cfg, log=lines.append)
    bf16 = native_bf16(torch.device("cpu"))
    assert sum("no native bf16" in line for line in lines) == (0 if bf16 else 1)
    assert math.isfinite(result.history[0]["train_loss"]) and 0 <= result.final["bleu_test_test"] <= 100
    assert all(p.dtype == torch.float32 for p in result.model.parameters())  # autocast leaves the weights fp32
    batch = make_batches(result.data.splits["dev"][:4], 4)[0]
    with torch.no_grad(), autocast(cfg, torch.device("cpu")):
        logits, _ = result.model(batch.src, batch.src_lengths, batch.tgt_in)
    assert logits.dtype == (torch.bfloat16 if bf16 else torch.float32)


def test_guided_alignment_trains_on_eflomal_links_cached_with_the_corpus(tmp_path):
    """The synthetic corpus has no gold links: eflomal aligns its training pairs once, into the cache."""
    cfg = _cfg(train={"epochs": 1, "guided_alignment": 1.0}, data={"cache_dir": str(tmp_path)})
    result = train(cfg, log=_quiet)
    assert math.isfinite(result.history[-1]["train_loss"])
    examples = result.data.splits["train"]
    assert (
        all(e.links is not None for e in examples) and sum(map(bool, (e.links for e in examples))) > len(examples) / 2
    )
    assert len(list((tmp_path / "alignments").glob("eflomal-*.json.gz"))) == 1
    batch = make_batches(examples[:8], 8)[0]
    assert batch.alignment.shape == (8, batch.tgt_out.size(1), batch.src.size(1))
    assert torch.allclose(batch.alignment.sum(-1)[batch.alignment.sum(-1) > 0], torch.tensor(1.0))


def test_bilingual_symmetry_trains_both_directions_and_scores_the_reverse():
    states = []
    result = train(
        _cfg(train={"epochs": 2, "symmetry_weight": 1.0}),
        log=_quiet,
        on_epoch_end=lambda report, state, best: states.append(state),
    )
    assert result.final["reverse_bleu_test_test"] > 10  # t->s learns too (copying scores 0 here)
    assert {"reverse_model", "best_reverse_model"} <= set(states[-1])
