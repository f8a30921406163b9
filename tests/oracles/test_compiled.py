"""`model.compile` computes the same model as eager PyTorch: the same loss, the same gradient for every parameter and
the same greedy and beam translations, in float64 (Inductor's CPU code keeps float64), for every variant the
throughput benchmark times; and the compiled step neither breaks its graph nor recompiles per batch.

Compiling is slow on a CPU (tens of seconds per variant), so the fast suite covers the baseline and SACT, and the
`slow` suite one variant per code path of the step (all 15 passed once, in 30 minutes on a loaded 2-core machine)."""

import sys
from pathlib import Path

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from nmt_core.compiled import compile_seconds
from nmt_core.data import Example, collate
from nmt_core.decode import beam_search, greedy
from nmt_core.train import batch_loss, build_model, symmetric_loss
from tests.conftest import tiny_config

sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))

from throughput import VARIANTS  # noqa: E402

SRC_VOCAB, TGT_VOCAB = 30, 20
FAST = ("none", "sact")
# one variant per code path the step compiles through (plain ops, the gate, the second transition, the coverage state,
# the step's self-attention); CI's time keeps the other eight benchmarked variants, which share those paths, out
SLOW = ("plain", "sentinel", "cgru", "fertility", "self_attention")


def _batch(lengths: tuple[tuple[int, int], ...], seed: int):
    g = torch.Generator().manual_seed(seed)
    examples = []
    for src_len, tgt_len in lengths:
        src = torch.randint(4, SRC_VOCAB, (src_len,), generator=g).tolist()
        tgt = torch.randint(4, TGT_VOCAB, (tgt_len,), generator=g).tolist()
        examples.append(Example(src, tgt, [(min(i, src_len - 1), i) for i in range(tgt_len)]))
    return collate(examples, list(range(len(examples))))


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


def _losses_and_grads(cfg, model, reverse) -> list[tuple[torch.Tensor, list[torch.Tensor | None]]]:
    modules = [model] if reverse is None else [model, reverse]
    parameters = [p for m in modules for p in m.parameters()]
    results = []
    for i, lengths in enumerate(BATCHES):
        batch = _batch(lengths, i)
        loss = batch_loss(model, batch, cfg)[0] if reverse is None else symmetric_loss(model, reverse, batch, cfg)
        results.append((loss.detach(), list(torch.autograd.grad(loss, parameters, allow_unused=True))))
    return results


def _translations(cfg, model) -> list:
    model.eval()
    return [
        decode(model, _batch(lengths, i), cfg.decode)
        for decode in (greedy, lambda m, b, c: beam_search(m, b, c, 3))
        for i, lengths in enumerate(BATCHES[:2])
    ]


def _run(name: str, mode: str) -> tuple[list, list]:
    cfg, model, reverse = _models(name, mode)
    return _losses_and_grads(cfg, model, reverse), _translations(cfg, model)


@pytest.fixture(autouse=True)
def _recompiling_past_the_limit_fails():
    """Past Dynamo's recompile limit the step would fall back to eager with a warning: here it is an error."""
    with torch._dynamo.config.patch(fail_on_recompile_limit_hit=True):
        yield


def _check_same_model(name: str) -> None:
    torch._dynamo.reset()
    counters.clear()
    eager_train, eager_decoded = _run(name, "none")
    assert not counters["stats"], "eager ran through Dynamo"
    compiled_train, compiled_decoded = _run(name, "default")
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


@pytest.mark.parametrize("name", FAST)
def test_the_compiled_step_computes_the_eager_models_loss_gradients_and_translations(name):
    _check_same_model(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLOW)
def test_every_benchmarked_variant_compiles_to_the_same_model(name):
    _check_same_model(name)


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


@pytest.mark.slow
def test_a_compiled_trial_trains_like_the_eager_one_and_reports_its_compile_time_once():
    """The trial's loop (train, dev loss, greedy dev BLEU, beam test BLEU) through the compiled step: the same epoch
    losses as eager in float32 (dropout 0; within 1e-4), and the compile seconds reported once, at the end."""
    from nmt_core.train import train

    results = {
        mode: train(tiny_config(model={"compile": mode}, train={"epochs": 2}), log=lambda _: None)
        for mode in ("none", "default")
    }
    eager, compiled = results["none"], results["default"]
    for e, c in zip(eager.history, compiled.history):
        assert abs(e["train_loss"] - c["train_loss"]) < 1e-4 and abs(e["dev_loss"] - c["dev_loss"]) < 1e-4
    assert compiled.final["compile_time_s"] > 0 and "compile_time_s" not in eager.final
    assert all("compile_time_s" not in report for report in compiled.history)
