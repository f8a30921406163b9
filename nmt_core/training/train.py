"""The training loop. It knows nothing of Ray or MLflow: it reports and checkpoints through a callback.

Resume is exact: the state handed to the callback holds the model, optimiser, RNG states and counters,
and the batches of epoch k depend only on (seed, k), so a run stopped after epoch k and resumed
reproduces the losses of an uninterrupted run.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from nmt_core.config import TrialConfig
from nmt_core.data.alignment import guided_alignment_loss
from nmt_core.data.batches import (
    Batch,
    Example,
    Segmenter,
    TrialData,
    Vocab,
    bucket_width,
    load_trial_data,
    make_batches,
)
from nmt_core.models import build
from nmt_core.models.attention import coverage_penalty, decoding_parts, plain_decoding
from nmt_core.models.rnn import EOS, PAD, DecoderTrace, Seq2Seq
from nmt_core.training.checkpoint import FORMAT as CHECKPOINT_FORMAT
from nmt_core.training.compiled import compile_model, compile_seconds, loss_function, static_shapes
from nmt_core.training.decode import Translation, translate
from nmt_core.training.diagnostics import AttentionDiagnostics
from nmt_core.training.evaluate import (
    CHRF_NAME,
    MT_METRICS,
    PAPER_BLEU,
    PLAIN,
    AlignmentScore,
    BleuResult,
    ForcedTrace,
    MetricResult,
    attention_alignment,
    bleu_options,
    corpus_bleu,
    corpus_metric,
)
from nmt_core.training.graphs import CapturedLoss
from nmt_core.training.progress import EpochProgress
from nmt_core.training.symmetry import reverse_batch, reversed_data, trace_bonus

# (report, state, is_best): called after every epoch; `state` is what `train(resume=...)` takes back
EpochCallback = Callable[[dict[str, float], dict[str, Any], bool], None]


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite: the trial failed, the sweep goes on."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("train.device: cuda was asked for but no CUDA device is visible")
    return torch.device(name)


def use_tensor_cores(device: torch.device) -> None:
    """fp32 matrix products on TF32 tensor cores (10-bit mantissa, as nanoGPT does); nothing changes on a CPU."""
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")


def build_model(cfg: TrialConfig, src_vocab: int, tgt_vocab: int) -> Seq2Seq:
    return compile_model(build.build_model(cfg.model, cfg.attention, src_vocab, tgt_vocab), cfg.model.compile)


def native_bf16(device: torch.device) -> bool:
    """CUDA, or a CPU whose oneDNN has native bf16 (AVX-512 BF16, AMX). Elsewhere bf16 is emulated (2.4x slower
    on a Xeon without it) and oneDNN's LSTM refuses it outright."""
    return device.type == "cuda" or torch.ops.mkldnn._is_mkldnn_bf16_supported()


def autocast(cfg: TrialConfig, device: torch.device):
    """bf16 autocast when `train.amp` and the device has native bf16 (~1.35x faster on a Zen 4 CPU); else fp32.
    Captured steps (`model.compile: graphs`) cast the weights at every replay: a cast cached outside the graph
    would be gone at the next one."""
    if cfg.train.amp and native_bf16(device):
        return torch.autocast(device.type, dtype=torch.bfloat16, cache_enabled=cfg.model.compile != "graphs")
    return nullcontext()


def bucket(cfg: TrialConfig) -> int:
    """The width of the trial's length buckets in tokens (`train.buckets` over data.max_len); 0: no buckets."""
    return bucket_width(cfg.data.max_len, cfg.train.buckets)


def teacher_forced(model: Seq2Seq, batch: Batch, cfg: TrialConfig) -> tuple[Tensor, DecoderTrace, Tensor]:
    """Logits (N, V) of the batch forced through its references, the trace, and the N target ids; on the fast path
    only real target tokens get logits (padding is ignored by the loss anyway, and holds up to half the positions),
    unless the step must keep one shape per length bucket (`static_shapes`): then every position does, and the loss
    masks padding."""
    if not cfg.model.fast_path or static_shapes(cfg.model.compile):
        logits, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
        return logits.flatten(0, 1), trace, batch.tgt_out.flatten()
    real = batch.real_positions()
    logits, trace = model(batch.src, batch.src_lengths, batch.tgt_in, real)
    return logits, trace, batch.tgt_out.flatten().index_select(0, real)


def summed_token_loss(logits: Tensor, targets: Tensor, cfg: TrialConfig, label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy summed over target tokens: fused on the fast path (padding rows masked with static shapes,
    absent otherwise), else PyTorch's."""
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # bf16 logits normalised in fp32
    if cfg.model.fast_path:
        return loss_function(cfg.model.compile)(logits, targets, label_smoothing)
    return nn.functional.cross_entropy(
        logits, targets, ignore_index=PAD, reduction="sum", label_smoothing=label_smoothing
    )


def batch_loss(model: Seq2Seq, batch: Batch, cfg: TrialConfig) -> tuple[Tensor, DecoderTrace]:
    """Mean loss per target token (+ the coverage regulariser, per token; + guided alignment's H(A, alpha), per
    sentence), and the teacher-forced attention trace."""
    logits, trace, targets = teacher_forced(model, batch, cfg)
    loss = summed_token_loss(logits, targets, cfg, cfg.train.label_smoothing)
    if cfg.attention.coverage_weight > 0:
        loss = loss + cfg.attention.coverage_weight * coverage_penalty(
            trace.weights, batch.src != PAD, batch.tgt_out != PAD, trace.fertility
        )
    loss = loss / batch.n_tokens
    if cfg.train.guided_alignment > 0 and batch.alignment is not None:
        tgt_words = (batch.tgt_out != PAD).sum(-1) - 1
        loss = loss + cfg.train.guided_alignment * guided_alignment_loss(trace.weights, batch.alignment, tgt_words)
    return loss, trace


def trial_loss(cfg: TrialConfig) -> Callable[..., Tensor]:
    """(batch, model[, reverse]) -> the loss a training step minimises: one model's, or bilingual symmetry's two."""

    def loss(batch: Batch, model: Seq2Seq, reverse: Seq2Seq | None = None) -> Tensor:
        return batch_loss(model, batch, cfg)[0] if reverse is None else symmetric_loss(model, reverse, batch, cfg)

    return loss


def step_loss(model: Seq2Seq, reverse: Seq2Seq | None, cfg: TrialConfig, device: torch.device) -> Callable:
    """batch -> the training loss of one step: eager, or on CUDA with `model.compile: graphs` the decoders' forward
    and backward replayed from CUDA graphs (nmt_core.training.graphs)."""
    loss = trial_loss(cfg)
    if cfg.model.compile == "graphs" and device.type == "cuda":
        return CapturedLoss(loss, [m for m in (model, reverse) if m is not None])
    return lambda batch: loss(batch, model, reverse)


def symmetric_loss(model: Seq2Seq, reverse: Seq2Seq, batch: Batch, cfg: TrialConfig) -> Tensor:
    """Both directions' losses minus the weighted trace bonus per target token (Cohn et al. 2016: the joint
    objective log p(t|s) + log p(s|t) + gamma B)."""
    loss, trace = batch_loss(model, batch, cfg)
    reverse_loss, reverse_trace = batch_loss(reverse, reverse_batch(batch), cfg)
    bonus = trace_bonus(trace.weights, reverse_trace.weights, batch) / batch.n_tokens
    return loss + reverse_loss - cfg.train.symmetry_weight * bonus


def build_optimizer(model: nn.Module, cfg: TrialConfig) -> torch.optim.Optimizer:
    """Adam with the paper's betas; fused: one kernel (CUDA) or one loop (CPU) for all parameters, ~5x faster."""
    return torch.optim.Adam(model.parameters(), lr=cfg.train.lr, betas=(0.9, 0.999), eps=1e-8, fused=True)


def scheduled_lr(cfg: TrialConfig, step: int) -> float:
    """The rate of update `step` (1, 2, ...): train.lr, or with inverse_sqrt lr * min(step / warmup,
    sqrt(warmup / step)): a linear warm-up to train.lr, then 1/sqrt(step) (Vaswani et al. 2017 eq. 3, peak = lr)."""
    if cfg.train.schedule == "constant":
        return cfg.train.lr
    warmup = cfg.train.warmup
    return cfg.train.lr * min(step / warmup, math.sqrt(warmup / step))


def updates_done(optimizer: torch.optim.Optimizer) -> int:
    """How many updates the optimiser has made (Adam counts them): a resumed run's schedule goes on from there."""
    steps = [state["step"] for state in optimizer.state.values() if "step" in state]
    return int(steps[0]) if steps else 0


def optimizer_step(optimizer: torch.optim.Optimizer, loss: Tensor, parameters, clip_norm: float) -> None:
    """Backward, clip the gradient norm (the paper's 10), update."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    nn.utils.clip_grad_norm_(parameters, clip_norm)
    optimizer.step()


@torch.no_grad()
def dev_pass(model: Seq2Seq, batches: list[Batch], cfg: TrialConfig, device: torch.device) -> dict[str, float]:
    """Teacher-forced dev loss (without label smoothing) and the attention diagnostics (tau, gate, saturation)."""
    model.eval()
    totals = torch.zeros(2, device=device)  # loss sum, tokens
    diagnostics = AttentionDiagnostics(cfg.attention)
    for batch in batches:
        batch = batch.to(device)
        with autocast(cfg, device):
            logits, trace, targets = teacher_forced(model, batch, cfg)
        mask = batch.tgt_out != PAD
        loss = summed_token_loss(logits, targets, cfg)
        totals += torch.stack([loss, mask.sum()])
        diagnostics.add(trace, batch.src != PAD, mask & (batch.tgt_out != EOS))  # words: </s> attends nowhere
    loss_sum, tokens = totals.tolist()
    return {"dev_loss": loss_sum / tokens, **diagnostics.report()}


@dataclass
class SetResult:
    bleu: float
    signature: str  # sacrebleu's own signature of `bleu`
    paper_bleu: float  # lowercased BLEU of word tokens, as multi-bleu.perl computes it (the SACT paper's number)
    paper_signature: str
    hypotheses: list[str]
    translations: list[Translation]
    scores: dict[str, MetricResult] = field(default_factory=dict)  # chrF (and on test sets TER), by MT_METRICS name


def evaluate_split(
    model: Seq2Seq,
    data: TrialData,
    split: str,
    cfg: TrialConfig,
    device: torch.device,
    beam_size: int,
    metrics: tuple[str, ...] = (CHRF_NAME,),
) -> SetResult:
    """BLEU of the detokenised output against the corpus' raw reference text, the paper-comparable BLEU, and the
    `metrics` beside them (chrF by default: cheap enough for dev every epoch; test sets add TER)."""
    with autocast(cfg, device):  # decoding in bf16 too: 1.7x faster greedy search on a bf16 CPU
        translations = translate(
            model, data.splits[split], cfg.decode, beam_size, cfg.train.batch_size, device, bucket(cfg)
        )
    hypotheses = [data.tgt_segmenter.detokenize(data.tgt_vocab.decode(t.tokens)) for t in translations]
    bleu, paper = score_text(hypotheses, data.references[split], data.tgt_segmenter, cfg)
    scores = metric_scores(hypotheses, data.references[split], cfg, metrics)
    return SetResult(bleu.score, bleu.signature, paper.score, paper.signature, hypotheses, translations, scores)


def metric_scores(
    hypotheses: list[str], references: list[str], cfg: TrialConfig, metrics: tuple[str, ...]
) -> dict[str, MetricResult]:
    """chrF and TER (sacrebleu's, with their signatures) of the same detokenised output against the same raw
    references as BLEU, in the trial's case (nmt_core.training.evaluate.mt_metric)."""
    lowercase = bleu_options(cfg)["lowercase"]
    return {name: corpus_metric(name, hypotheses, references, lowercase) for name in metrics}


def score_text(
    hypotheses: list[str], references: list[str], segmenter: Segmenter, cfg: TrialConfig, lowercase: bool = False
) -> tuple[BleuResult, BleuResult]:
    """sacrebleu's BLEU with the trial's options (`lowercase` forces case-insensitive), and multi-bleu: lowercased
    BLEU of word tokens, the papers' number."""
    options = bleu_options(cfg)
    bleu = corpus_bleu(hypotheses, references, options["tokenize"], options["lowercase"] or lowercase)
    words = segmenter.paper_tokens
    return bleu, corpus_bleu([words(h) for h in hypotheses], [words(r) for r in references], "none", lowercase=True)


@torch.no_grad()
def teacher_forced_weights(
    model: Seq2Seq, examples: list[Example], cfg: TrialConfig, device: torch.device
) -> list[np.ndarray]:
    """Attention weights (target words, source words) of each example forced through its reference."""
    model.eval()
    weights: list[np.ndarray | None] = [None] * len(examples)
    for batch in make_batches(examples, cfg.train.batch_size, bucket=bucket(cfg)):
        batch = batch.to(device)
        with autocast(cfg, device):
            _, trace = model(batch.src, batch.src_lengths, batch.tgt_in)
        matrices = trace.weights.float().cpu().numpy()
        for row, i in enumerate(batch.index):
            weights[i] = matrices[row, : len(examples[i].tgt), : len(examples[i].src)]  # </s> row left out
    return weights


@torch.no_grad()
def teacher_forced_traces(
    model: Seq2Seq, examples: list[Example], cfg: TrialConfig, device: torch.device
) -> list[ForcedTrace]:
    """The temperature and gate of every reference token, from the dev loss's forward pass (`teacher_forced`): what
    the model does at a word is read where the word is the reference's, not where the model's own output (at any
    BLEU) happens to be."""
    model.eval()
    traces: list[ForcedTrace | None] = [None] * len(examples)
    for batch in make_batches(examples, cfg.train.batch_size):
        batch = batch.to(device)
        with autocast(cfg, device):
            _, trace, _ = teacher_forced(model, batch, cfg)
        tau, gate = (None if t is None else t.float().cpu().numpy() for t in (trace.tau, trace.gate))
        observed = {name: value.float().cpu().numpy() for name, value in trace.observed.items()}
        for row, i in enumerate(batch.index):
            n = len(examples[i].tgt)
            traces[i] = ForcedTrace(
                None if tau is None else tau[row, :n],
                None if gate is None else gate[row, :n],
                {name: value[row, :n] for name, value in observed.items()},
            )
    return traces


def alignment_scores(
    model: Seq2Seq, data: TrialData, cfg: TrialConfig, device: torch.device
) -> dict[str, AlignmentScore]:
    """Attention against the gold word alignments of every test set that has them."""
    return {
        name: attention_alignment(teacher_forced_weights(model, data.splits[name], cfg, device), data.alignments[name])
        for name in data.test_sets
        if name in data.alignments
    }


@dataclass
class TrainResult:
    config: TrialConfig
    model: Seq2Seq
    data: TrialData
    history: list[dict[str, float]]
    final: dict[str, float]  # bleu_test_<set>, bleu_test_avg, n_params, best_epoch
    tests: dict[str, SetResult] = field(default_factory=dict)
    alignments: dict[str, AlignmentScore] = field(default_factory=dict)  # test sets with gold word alignments


def _rng_state() -> dict[str, Any]:
    state = {"torch": torch.get_rng_state(), "python": list(random.getstate()[1])}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate((3, tuple(state["python"]), None))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def subword_models(state: dict[str, Any]) -> tuple[bytes | None, bytes | None]:
    """The SentencePiece models a checkpoint carries (None for word tokenisers)."""
    models = state.get("subword", {})
    return models.get("src"), models.get("tgt")


def _cpu_copy(obj: Any) -> Any:
    """A CPU snapshot of nested state: later in-place updates (Adam's moments) must not leak into it."""
    if isinstance(obj, Tensor):
        return obj.detach().to("cpu", copy=True)
    if isinstance(obj, dict):
        return {k: _cpu_copy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_cpu_copy(v) for v in obj)
    return obj


def train(
    cfg: TrialConfig,
    on_epoch_end: EpochCallback | None = None,
    resume: dict[str, Any] | None = None,
    log: Callable[[str], None] = print,
    data: TrialData | None = None,
    step_progress: EpochProgress | None = None,
) -> TrainResult:
    """Train one configuration; `resume` is a state an earlier run handed to `on_epoch_end`."""
    device = resolve_device(cfg.train.device)
    use_tensor_cores(device)
    compiled_before = compile_seconds()
    data = data or trial_data(cfg, resume, log)
    model, reverse, optimizer = build_training(cfg, data, device, log)
    progress, best_weights, best_reverse = restore_state(resume, model, reverse, optimizer, cfg)
    dev_batches = make_batches(data.splits["dev"], cfg.train.batch_size, bucket=bucket(cfg))
    loss = step_loss(model, reverse, cfg, device)
    updates = updates_done(optimizer)
    for epoch in range(progress["epoch"] + 1, cfg.train.epochs + 1):
        start = time.perf_counter()
        batches = epoch_batches(data, cfg, epoch)
        train_loss, tokens, updates = train_epoch(
            model, reverse, optimizer, batches, loss, cfg, device, updates, step_progress, epoch
        )
        if not math.isfinite(train_loss):
            raise TrainingDiverged(f"epoch {epoch}: training loss is {train_loss}")
        report = epoch_report(
            model, data, dev_batches, cfg, device, epoch, train_loss, tokens / (time.perf_counter() - start)
        )
        report["epoch_time_s"] = time.perf_counter() - start
        is_best = record_epoch(progress, report, optimizer, cfg)
        if is_best:
            best_weights = _cpu_copy(model.state_dict())
            best_reverse = None if reverse is None else _cpu_copy(reverse.state_dict())
        log(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in report.items()))
        if on_epoch_end:
            on_epoch_end(
                report,
                checkpoint_state(progress, model, reverse, optimizer, best_weights, best_reverse, cfg, data),
                is_best,
            )
        if cfg.train.early_stopping and progress["bad_epochs"] >= cfg.train.early_stopping:
            log(f"early stopping: no better {cfg.train.early_stopping_metric} for {progress['bad_epochs']} epochs")
            break

    model.load_state_dict(best_weights)
    if reverse is not None:
        reverse.load_state_dict(best_reverse)
    final, tests, alignments = final_scores(model, reverse, data, cfg, device)
    final.update(n_params=model.n_params(), best_epoch=progress["best_epoch"])
    if cfg.model.compile != "none":  # what this run spent compiling, inside its epoch and evaluation times
        final["compile_time_s"] = compile_seconds() - compiled_before
    log(
        " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in final.items())
        + f"  ({next(iter(tests.values())).signature})"
    )
    return TrainResult(cfg, model, data, progress["history"], final, tests, alignments)


def trial_data(cfg: TrialConfig, resume: dict[str, Any] | None, log: Callable[[str], None]) -> TrialData:
    """The trial's corpus, tokenised with a resumed run's vocabularies and subword models, or with new ones."""
    vocabs = (Vocab(resume["vocab"]["src"]), Vocab(resume["vocab"]["tgt"])) if resume else None
    return load_trial_data(
        cfg.data,
        vocabs,
        subword_models(resume) if resume else None,
        training_links=cfg.train.guided_alignment > 0,
        eval_max_len=cfg.decode.max_src_len,
        log=log,
    )


def build_training(
    cfg: TrialConfig, data: TrialData, device: torch.device, log: Callable[[str], None]
) -> tuple[Seq2Seq, Seq2Seq | None, torch.optim.Optimizer]:
    """The seeded model (with bilingual symmetry, the t->s one beside it: one optimiser for both; the best weights
    are chosen by s->t's dev BLEU) and its optimiser, and a line saying what trains where."""
    torch.manual_seed(cfg.train.seed)
    random.seed(cfg.train.seed)
    model = build_model(cfg, len(data.src_vocab), len(data.tgt_vocab)).to(device)
    reverse = (
        build_model(cfg, len(data.tgt_vocab), len(data.src_vocab)).to(device) if cfg.train.symmetry_weight > 0 else None
    )
    optimizer = build_optimizer(nn.ModuleList([model] if reverse is None else [model, reverse]), cfg)
    if cfg.train.amp and not native_bf16(device):
        log("train.amp: this CPU has no native bf16 (AVX-512 BF16 or AMX): training in fp32 instead")
    if cfg.model.compile == "graphs" and device.type != "cuda":
        log("model.compile: graphs captures CUDA graphs; without CUDA the same static-shape step runs eagerly")
    log(
        f"model: {model.n_params():,} parameters on {device}; {len(data.splits['train']):,} training pairs, "
        f"vocab {len(data.src_vocab):,}/{len(data.tgt_vocab):,}"
    )
    return model, reverse, optimizer


def record_epoch(progress: dict[str, Any], report: dict[str, Any], optimizer, cfg: TrialConfig) -> bool:
    """Add the epoch's report to `progress`; whether its dev score (train.early_stopping_metric: dev BLEU or chrF)
    is the best so far (else, with train.lr_decay, the rate decays after train.lr_patience epochs without a better
    one). `best_bleu` holds the best value of that metric: the name checkpoints have carried since BLEU was the
    only one."""
    score = report[cfg.train.early_stopping_metric]
    is_best = score > progress["best_bleu"]
    if is_best:
        progress.update(best_bleu=score, best_epoch=report["epoch"], bad_epochs=0)
    else:
        progress["bad_epochs"] += 1
        if cfg.train.lr_decay < 1 and progress["bad_epochs"] % cfg.train.lr_patience == 0:
            for group in optimizer.param_groups:
                group["lr"] *= cfg.train.lr_decay
    progress["epoch"] = report["epoch"]
    progress["history"].append(report)
    return is_best


def restore_state(
    resume: dict[str, Any] | None,
    model: Seq2Seq,
    reverse: Seq2Seq | None,
    optimizer: torch.optim.Optimizer,
    cfg: TrialConfig,
) -> tuple[dict[str, Any], dict, dict | None]:
    """(progress, best weights, best reverse weights): a fresh run's, or a checkpoint's with the model, optimiser
    and RNG put back where it stopped."""
    progress = {"epoch": 0, "best_bleu": -1.0, "best_epoch": 0, "bad_epochs": 0, "history": []}
    if not resume:
        return progress, _cpu_copy(model.state_dict()), None if reverse is None else _cpu_copy(reverse.state_dict())
    model.load_state_dict(resume["model"])
    if reverse is not None:
        reverse.load_state_dict(resume["reverse_model"])
    optimizer.load_state_dict(resume["optimizer"])
    if resume["config"]["train"]["lr"] != cfg.train.lr:  # PBT explored a new rate; Adam's moments stay
        for group in optimizer.param_groups:
            group["lr"] = cfg.train.lr
    _set_rng_state(resume["rng"])
    return (
        {k: resume[k] for k in progress},
        resume["best_model"],
        resume["best_reverse_model"] if reverse is not None else None,
    )


def epoch_report(
    model: Seq2Seq,
    data: TrialData,
    dev_batches: list[Batch],
    cfg: TrialConfig,
    device: torch.device,
    epoch: int,
    train_loss: float,
    tokens_per_s: float,
) -> dict[str, Any]:
    """An epoch's metrics: training loss and speed, dev loss and perplexity, dev BLEU and chrF, the attention
    diagnostics."""
    dev = dev_pass(model, dev_batches, cfg, device)
    decoded = evaluate_split(model, data, "dev", cfg, device, cfg.decode.dev_beam_size)
    return {
        "epoch": epoch,
        "train_loss": train_loss,
        "dev_loss": dev["dev_loss"],
        "dev_ppl": math.exp(min(dev["dev_loss"], 50.0)),
        "bleu_dev": decoded.bleu,
        "chrf_dev": decoded.scores[CHRF_NAME].score,
        "tokens_per_s": tokens_per_s,
        **{k: v for k, v in dev.items() if k != "dev_loss"},
    }


def epoch_batches(data: TrialData, cfg: TrialConfig, epoch: int) -> list[Batch]:
    """The shuffled training batches of `epoch`: they depend on (seed, epoch) alone, so a resumed run sees the same
    (train.max_steps_per_epoch keeps the first ones)."""
    batches = make_batches(
        data.splits["train"],
        cfg.train.batch_size,
        cfg.train.token_budget,
        shuffle_seed=cfg.train.seed * 100_003 + epoch,
        bucket=bucket(cfg),
    )
    return batches[: cfg.train.max_steps_per_epoch or None]


def train_epoch(
    model: Seq2Seq,
    reverse: Seq2Seq | None,
    optimizer: torch.optim.Optimizer,
    batches: list[Batch],
    loss_of: Callable[[Batch], Tensor],
    cfg: TrialConfig,
    device: torch.device,
    updates: int,
    step_progress: EpochProgress | None,
    epoch: int,
) -> tuple[float, int, int]:
    """One pass over the batches, each step's loss from `loss_of` (step_loss): (mean loss per target token, target
    tokens, updates so far)."""
    trained = nn.ModuleList([model] if reverse is None else [model, reverse])
    trained.train()
    loss_sum, tokens = torch.zeros((), device=device), 0
    if step_progress:
        step_progress.start(epoch, cfg.train.epochs, len(batches))
    for step, batch in enumerate(batches, 1):
        batch = batch.to(device)
        updates += 1
        if cfg.train.schedule != "constant":
            for group in optimizer.param_groups:
                group["lr"] = scheduled_lr(cfg, updates)
        with autocast(cfg, device):
            loss = loss_of(batch)
        optimizer_step(optimizer, loss, trained.parameters(), cfg.train.clip_norm)
        loss_sum += loss.detach() * batch.n_tokens
        tokens += batch.n_tokens
        if step_progress:
            step_progress.step(step, tokens, lambda: loss_sum.item() / tokens)  # noqa: B023 (called at once)
    if step_progress:
        step_progress.end()
    return loss_sum.item() / tokens, tokens, updates  # the one host-device sync of the epoch


def checkpoint_state(
    progress: dict[str, Any],
    model: Seq2Seq,
    reverse: Seq2Seq | None,
    optimizer: torch.optim.Optimizer,
    best_weights: dict,
    best_reverse: dict | None,
    cfg: TrialConfig,
    data: TrialData,
) -> dict[str, Any]:
    """Everything a resumed run needs, on the CPU: weights (current and best), optimiser, RNG, config, vocabularies
    and subword models."""
    state = {
        **progress,
        "format": CHECKPOINT_FORMAT,
        "history": list(progress["history"]),
        "model": _cpu_copy(model.state_dict()),
        "optimizer": _cpu_copy(optimizer.state_dict()),
        "best_model": best_weights,
        "rng": _rng_state(),
        "config": cfg.to_dict(),
        "vocab": {"src": data.src_vocab.words, "tgt": data.tgt_vocab.words},
        "subword": {
            side: seg.model
            for side, seg in (("src", data.src_segmenter), ("tgt", data.tgt_segmenter))
            if seg.model is not None
        },
    }
    if reverse is not None:
        state.update(reverse_model=_cpu_copy(reverse.state_dict()), best_reverse_model=best_reverse)
    return state


def final_scores(
    model: Seq2Seq, reverse: Seq2Seq | None, data: TrialData, cfg: TrialConfig, device: torch.device
) -> tuple[dict[str, Any], dict[str, SetResult], dict[str, AlignmentScore]]:
    """The best-dev weights on every test set: BLEU (and the papers' multi-bleu), chrF and TER, AER where gold links
    exist, and t->s BLEU against the source texts for a symmetric pair."""
    tests = {
        name: evaluate_split(model, data, name, cfg, device, cfg.decode.beam_size, MT_METRICS)
        for name in data.test_sets
    }
    final = per_set("bleu", {name: result.bleu for name, result in tests.items()})
    final.update(per_set(PAPER_BLEU, {name: result.paper_bleu for name, result in tests.items()}))
    for metric in MT_METRICS:
        final.update(per_set(metric, {name: result.scores[metric].score for name, result in tests.items()}))
    alignments = alignment_scores(model, data, cfg, device)
    for name, score in alignments.items():
        final[f"aer_{name}"], final[f"gold_attention_{name}"] = score.aer, score.gold_mass
    if reverse is not None:
        back = reversed_data(data)
        final.update(
            {
                f"reverse_bleu_test_{name}": evaluate_split(
                    reverse, back, name, cfg, device, cfg.decode.beam_size, ()
                ).bleu
                for name in data.test_sets
            }
        )
    final.update(plain_scores(model, data, cfg, device))
    return final, tests, alignments


def per_set(metric: str, scores: dict[str, float]) -> dict[str, float]:
    """`<metric>_test_<set>` of each test set and `<metric>_test_avg`, their mean (the tables' `avg`)."""
    named = {f"{metric}_test_{name}": score for name, score in scores.items()}
    return {**named, f"{metric}_test_avg": sum(scores.values()) / len(scores)}


def plain_scores(model: Seq2Seq, data: TrialData, cfg: TrialConfig, device: torch.device) -> dict[str, float]:
    """Where the model has decoding-only attention parts (the entropy sharpening), BLEU of the same checkpoint decoded
    without them on every test set, `plain_bleu_test_<set>` and its average: their control, paired per checkpoint."""
    if not decoding_parts(model):
        return {}
    with plain_decoding(model):
        plain = {
            name: evaluate_split(model, data, name, cfg, device, cfg.decode.beam_size, ()).bleu
            for name in data.test_sets
        }
    return per_set(f"{PLAIN}bleu", plain)
