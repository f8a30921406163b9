"""Training tokens/s and decoding sentences/s at the SACT paper's En-Vi size, per attention variant.

    python benchmarks/throughput.py [--arch rnn|transformer] [--device cpu|cuda|all] [--steps N] [--rounds R]
                                    [--amp] [--json OUT] [--variants V ...] [--decode-batches N]
                                    [--compile [--compile-mode MODE]]

`--rounds 0` times decoding alone. `--compile` times every variant twice in the same rounds, eager and with
`model.compile` (rows `<variant>+compile`), and gives each compiled row its compilation seconds (Dynamo, Inductor,
backward graphs), which its warm-up calls spend and its timed calls do not.

Emb 512, hidden 512, vocabularies 17.7K / 7K, batch 64, sentence lengths like IWSLT'15 En-Vi (mean ~20
source words), synthetic token ids. joeynmt 2.3's recurrent model with the same sizes (bi-LSTM encoder,
LSTM decoder, Luong attention, input feeding) is timed in the same process when it is installed
(benchmarks/install_joeynmt.sh): its training speed is every variant's yardstick, and its own greedy and beam
search decode the same batches for as many steps (its row in the table).
`--arch transformer` times the Transformer (Vaswani et al. 2017 base: 6 + 6 layers, 8 heads, FF 2048, d 512 at
size `paper`; pre-norm) and its attention family against joeynmt 2.3's Transformer of the same sizes and norm.
Not a test: tests/unit/test_benchmarks.py only runs it for a few steps so it cannot rot.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import torch
from torch import nn

from nmt_core.config import build_config
from nmt_core.data.batches import Batch, Example, bucket_width, collate, make_batches
from nmt_core.models.rnn import BOS, EOS, PAD, UNK, Seq2Seq
from nmt_core.training.compiled import compile_seconds, static_shapes
from nmt_core.training.decode import beam_search, greedy, steps_for
from nmt_core.training.train import (
    autocast,
    build_model,
    build_optimizer,
    optimizer_step,
    step_loss,
    use_tensor_cores,
)

VARIANTS = {  # config sections over the defaults (general score, Luong placement, the fast path)
    "none": {},
    "plain": {"model": {"fast_path": False}},  # the baseline on the plain path: what the fast path gains
    # the baseline with every product in the loop (LOOP_AS_BEFORE): what nmt_core.models.unrolled gains
    "unhoisted": {},
    "fixed": {"attention": {"temperature": "fixed", "tau": 0.9}},
    "sact": {"attention": {"temperature": "sact", "lambda": 4.0}},
    "sentinel": {"attention": {"sentinel": True}},
    "concat": {"attention": {"score": "concat"}},
    "bahdanau": {"attention": {"placement": "bahdanau"}},
    "cgru": {"attention": {"placement": "cgru"}},
    "pos_log": {"attention": {"position_bias": "log"}},
    "pos_gaussian": {"attention": {"position_bias": "gaussian"}},
    "fertility": {"attention": {"score": "concat", "coverage": True, "coverage_weight": 0.1, "fertility": True}},
    "guided": {"train": {"guided_alignment": 0.5}},
    "intra_temporal": {"attention": {"intra_temporal": True}},
    "self_attention": {"attention": {"self_attention": "both"}},
    "symmetry": {"train": {"symmetry_weight": 1.0}},  # two models: exempt from the 0.7x bar
    # the mechanisms after SACT (issue 72)
    "sact_base": {"attention": {"temperature": "sact", "sact_base": True}},
    "sact_released": {
        "model": {"input_feeding": False, "encoder_merge": "sum"},
        "attention": {"temperature": "sact_released"},
    },
    "ssmax": {"attention": {"temperature": "ssmax"}},
    "ssmax_fixed": {"attention": {"temperature": "ssmax_fixed"}},
    "selective": {"attention": {"temperature": "selective"}},
    "softcap": {"attention": {"softcap": True}},
    "entmax": {"attention": {"normaliser": "entmax"}},
    "entmax_learned": {"attention": {"normaliser": "entmax_learned"}},
    "sharpening": {"attention": {"entropy_sharpening": True}},  # decoding only: training as `none`
}
TRANSFORMER_VARIANTS = {  # config sections over the Transformer's defaults (pre-norm, fused attention)
    "none": {},
    "plain": {"model": {"fast_path": False}},  # every attention block spelled out: what the fused kernel gains
    "fixed": {"attention": {"temperature": "fixed", "tau": 0.9}},
    "sact_query": {"attention": {"temperature": "sact", "sact_reading": "query"}},
    "sact_first_pass": {"attention": {"temperature": "sact", "sact_reading": "first_pass"}},
    "sact_first_pass_qk_norm": {  # unit queries and keys in the cross-attention: cosine / tau (attention.qk_norm)
        "attention": {"temperature": "sact", "sact_reading": "first_pass", "qk_norm": True}
    },
    "localness": {"attention": {"position_bias": "gaussian"}},
    "sentinel": {"attention": {"sentinel": True}},
    # the mechanisms after SACT (issue 72): SACT's fair port reads its tempered context position by position
    "sact_fair": {"attention": {"temperature": "sact", "sact_reading": "tempered", "sact_base": True, "qk_norm": True}},
    "ssmax": {"attention": {"temperature": "ssmax"}},
    "selective": {"attention": {"temperature": "selective"}},
    "softcap": {"attention": {"softcap": True}},
    "entmax_learned": {"attention": {"normaliser": "entmax_learned"}},
    "sharpening": {"attention": {"entropy_sharpening": True}},
}
ARCH_VARIANTS = {"rnn": VARIANTS, "transformer": TRANSFORMER_VARIANTS}
LOOP_AS_BEFORE = ("unhoisted",)  # RNN variants whose teacher-forced loop computes every product at every position
TRANSFORMER_SHAPES = {"paper": (6, 8, 2048), "small": (3, 4, 1024), "tiny": (1, 2, 32)}  # layers, heads, FF size
SIZES = {  # emb, hidden, source vocab, target vocab, batch
    "paper": (512, 512, 17700, 7000, 64),
    "small": (256, 256, 8000, 8000, 32),  # a base-like Transformer a shared 2-core CPU times in minutes
    "tiny": (16, 16, 50, 40, 8),  # the smoke test's
}


T = TypeVar("T")
SYNTHETIC_MAX_LEN = 60  # the longest synthetic target; length buckets are laid over it


def synthetic_examples(n: int, src_vocab: int, tgt_vocab: int, rng: random.Random) -> list[Example]:
    """Lengths drawn like IWSLT'15 En-Vi: source ~ N(20, 9) in [3, 50], target ~1.2x source."""
    examples = []
    for _ in range(n):
        src_len = min(50, max(3, int(rng.gauss(20, 9))))
        tgt_len = min(SYNTHETIC_MAX_LEN, max(3, int(src_len * rng.uniform(1.0, 1.4))))
        links = [(round(i * src_len / tgt_len), i) for i in range(tgt_len)]  # a diagonal, for guided alignment
        examples.append(
            Example(
                [rng.randrange(4, src_vocab) for _ in range(src_len)],
                [rng.randrange(4, tgt_vocab) for _ in range(tgt_len)],
                links,
            )
        )
    return examples


def synthetic_batches(n: int, batch: int, src_vocab: int, tgt_vocab: int, seed: int = 0) -> list[Batch]:
    """n batches of `batch` sentences drawn at random (about half the target positions are padding)."""
    rng = random.Random(seed)
    return [collate(synthetic_examples(batch, src_vocab, tgt_vocab, rng), list(range(batch))) for _ in range(n)]


def bucketed_batches(n: int, batch: int, src_vocab: int, tgt_vocab: int, buckets: int, seed: int = 0) -> list[Batch]:
    """The first n batches of an epoch as a trial with `train.buckets: buckets` draws them from a corpus of 50
    batches' worth of such sentences (buckets 0: sorted pools, the batching before buckets)."""
    examples = synthetic_examples(50 * batch, src_vocab, tgt_vocab, random.Random(seed))
    return make_batches(examples, batch, shuffle_seed=seed, bucket=bucket_width(SYNTHETIC_MAX_LEN, buckets))[:n]


def padding_share(batches: list[Batch]) -> float:
    """The share of target positions that are padding."""
    return 1 - sum(b.n_tokens for b in batches) / sum(b.tgt_out.numel() for b in batches)


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work, so that a timer reads what the GPU did, not what was launched."""
    if device.type == "cuda":
        torch.cuda.synchronize()


# wall: seconds as a user waits them; cpu: this process's CPU seconds, which other processes' load on a shared
# machine does not inflate (a CPU run with --threads 1; meaningless for a GPU, whose work is not the process's)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def timed(
    step: Callable[[object], int],
    batches: list,
    steps: int,
    device: torch.device,
    warmup: int = 2,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """Units (tokens or sentences) per second of `clock` over `steps` calls after `warmup` calls."""
    for batch in batches[:warmup]:
        step(batch)
    synchronize(device)
    start, units = clock(), 0
    for i in range(steps):
        units += step(batches[i % len(batches)])
    synchronize(device)
    return units / (clock() - start)


def train_step_fn(model: Seq2Seq, cfg, device: torch.device) -> Callable:
    """One training step as nmt_core.training.train takes it (with bilingual symmetry: both directions, one optimiser;
    with `model.compile: graphs` on CUDA, the decoders' forward and backward replayed from CUDA graphs)."""
    reverse = None
    if cfg.train.symmetry_weight > 0:
        torch.manual_seed(1)
        reverse = (
            build_model(cfg, model.decoder.output.out_features, model.encoder.embed.num_embeddings).to(device).train()
        )
    trained = nn.ModuleList([model] if reverse is None else [model, reverse])
    optimizer = build_optimizer(trained, cfg)
    loss_of = step_loss(model, reverse, cfg, device)

    def step(batch) -> int:
        batch = batch.to(device)
        with autocast(cfg, device):
            loss = loss_of(batch)
        optimizer_step(optimizer, loss, trained.parameters(), 10.0)
        return batch.n_tokens

    return step


def decode_fn(model: nn.Module, cfg, device: torch.device, beam: int, produced: list[int]) -> Callable:
    """Sentences per call; `produced` collects the output tokens."""

    def step(batch) -> int:
        batch = batch.to(device)
        with torch.no_grad(), autocast(cfg, device):
            out = greedy(model, batch, cfg.decode) if beam == 1 else beam_search(model, batch, cfg.decode, beam)
        produced.append(sum(len(t.tokens) + 1 for t in out))
        return batch.src.size(0)

    return step


class JoeyNMTMissing(RuntimeError):
    """joeynmt was asked for (--joeynmt), or is installed for this Python, and does not import."""


def joeynmt_folder() -> Path:
    """Where benchmarks/install_joeynmt.sh puts joeynmt for the running Python: one folder per version, so that a
    build for another Python (a compiled sentencepiece) never shadows this one's packages."""
    return Path(__file__).parent / ".joeynmt" / f"py{sys.version_info.major}{sys.version_info.minor}"


def load_joeynmt(arch: str = "rnn", required: bool = False):
    """joeynmt's encoder class, decoder class and Embeddings for `arch`; None when it is not installed, unless
    `required`. Installed for this Python and failing to import is an error either way (JoeyNMTMissing)."""
    folder = joeynmt_folder()
    if folder.is_dir() and str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    try:
        from joeynmt import decoders, encoders
        from joeynmt.embeddings import Embeddings
    except ImportError as error:
        if required or folder.is_dir():
            raise JoeyNMTMissing(
                f"joeynmt does not import in Python {platform.python_version()} ({error}); "
                f"install it for this Python: bash benchmarks/install_joeynmt.sh (folder {folder})"
            ) from error
        return None
    kind = "Recurrent" if arch == "rnn" else "Transformer"
    return getattr(encoders, f"{kind}Encoder"), getattr(decoders, f"{kind}Decoder"), Embeddings


def joeynmt_loss(
    outputs: torch.Tensor, tgt_out: torch.Tensor, n_tokens: int, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Cross-entropy per target token (joeynmt's XentLoss normalised by tokens), in fp32 under autocast too."""
    flat = nn.functional.cross_entropy(
        outputs.flatten(0, 1).float(),
        tgt_out.flatten(),
        ignore_index=PAD,
        reduction="sum",
        label_smoothing=label_smoothing,
    )
    return flat / n_tokens


JOEYNMT_SPECIALS = SimpleNamespace(
    pad_index=PAD, bos_index=BOS, eos_index=EOS, unk_index=UNK, sep_index=None, specials=[], lang_tags=[]
)
"""All that joeynmt's Model and search read of a vocabulary: the special ids, ours, so that it reads our batches."""


def joeynmt_model(parts, arch: str, size: tuple) -> nn.Module:
    """joeynmt 2.3's Model at the benchmark's sizes. The RNN: bi-LSTM encoder (H/2 per direction), LSTM decoder,
    Luong attention, input feeding, dropout 0.4 (the paper's). The Transformer: dropout 0.1, pre-norm (its
    `layer_norm: pre`), scaled embeddings."""
    from joeynmt.model import Model  # importable once load_joeynmt has found the package

    Encoder, Decoder, Embeddings = parts
    emb, hidden, src_vocab, tgt_vocab, _ = size
    if arch == "rnn":
        src_embed = Embeddings(embedding_dim=emb, vocab_size=src_vocab, padding_idx=PAD)
        trg_embed = Embeddings(embedding_dim=emb, vocab_size=tgt_vocab, padding_idx=PAD)
        encoder = Encoder(
            rnn_type="lstm", hidden_size=hidden // 2, emb_size=emb, bidirectional=True, dropout=0.4, emb_dropout=0.4
        )
        decoder = Decoder(
            rnn_type="lstm",
            emb_size=emb,
            hidden_size=hidden,
            encoder=encoder,
            attention="luong",
            vocab_size=tgt_vocab,
            dropout=0.4,
            emb_dropout=0.4,
            hidden_dropout=0.4,
            init_hidden="bridge",
            input_feeding=True,
        )
    else:
        layers, heads, ff_size = TRANSFORMER_SHAPES[size_name_of(size)]
        shape = {
            "hidden_size": hidden,
            "ff_size": ff_size,
            "num_layers": layers,
            "num_heads": heads,
            "dropout": 0.1,
            "emb_dropout": 0.1,
            "layer_norm": "pre",
        }
        src_embed = Embeddings(embedding_dim=hidden, scale=True, vocab_size=src_vocab, padding_idx=PAD)
        trg_embed = Embeddings(embedding_dim=hidden, scale=True, vocab_size=tgt_vocab, padding_idx=PAD)
        encoder, decoder = Encoder(**shape), Decoder(vocab_size=tgt_vocab, **shape)
    return Model(encoder, decoder, src_embed, trg_embed, JOEYNMT_SPECIALS, JOEYNMT_SPECIALS)


def size_name_of(size: tuple) -> str:
    return next(name for name, value in SIZES.items() if value == size)


def joeynmt_encode(model: nn.Module, batch, device: torch.device, amp: bool) -> tuple:
    """joeynmt's encoder over a batch sorted longest first, as its recurrent encoder packs them: the order, the
    source mask and the encoder's outputs and final state."""
    order = batch.src_lengths.argsort(descending=True)
    src = batch.src[order].to(device)
    src_mask = (src != PAD).unsqueeze(1)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
        encoded, hidden, _, _ = model(
            return_type="encode", src=src, src_length=batch.src_lengths[order].to(device), src_mask=src_mask
        )
    return order, src_mask, encoded, hidden


def joeynmt_train_fn(model: nn.Module, device: torch.device, amp: bool) -> Callable:
    """One joeynmt training step: its encoder and decoder, its loss per target token, Adam, clipping at 10."""
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-4)

    def step(batch) -> int:
        order, src_mask, encoded, hidden = joeynmt_encode(model, batch, device, amp)
        tgt_in, tgt_out = batch.tgt_in[order].to(device), batch.tgt_out[order].to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            outputs, _, _, _ = model(
                return_type="decode",
                encoder_output=encoded,
                encoder_hidden=hidden,
                src_mask=src_mask,
                trg_input=tgt_in,
                unroll_steps=tgt_in.size(1),
                trg_mask=(tgt_in != PAD).unsqueeze(1),
            )
        optimizer_step(optimizer, joeynmt_loss(outputs, tgt_out, batch.n_tokens), model.parameters(), 10.0)
        return batch.n_tokens

    return step


def joeynmt_decode_fn(model: nn.Module, cfg, device: torch.device, beam: int, produced: list[int]) -> Callable:
    """joeynmt's own greedy or beam search (its length penalty, alpha 1) for as many steps as ours decodes the
    batch, with `</s>` banned as for ours (its min_output_length is that step count). joeynmt 2.3's Transformer
    caches no keys and values: each step runs the decoder over the whole prefix. `produced` collects the output
    tokens, counted as decode_fn counts ours (one more for the `</s>` a sentence would end with)."""
    from joeynmt import search

    amp = cfg.train.amp

    def step(batch) -> int:
        steps = steps_for(int(batch.src_lengths.max()), cfg.decode)
        with torch.no_grad():
            _, src_mask, encoded, hidden = joeynmt_encode(model, batch, device, amp)
            searched = {
                "min_output_length": steps,
                "autocast": {"device_type": device.type, "dtype": torch.bfloat16, "enabled": amp},
            }
            if beam == 1:
                out, _, _ = search.greedy(src_mask, steps, model, encoded, hidden, **searched)
            else:
                out, _, _ = search.beam_search(model, beam, encoded, hidden, src_mask, steps, 1.0, **searched)
        produced.append(sum(len(row) + 1 for row in out))
        return batch.src.size(0)

    return step


def model_section(arch: str, size: tuple, input_feeding: bool) -> dict:
    """The model keys of a benchmark size: the RNN's (dropout 0.4, the paper's) or the Transformer's (0.1)."""
    emb, hidden = size[:2]
    if arch == "rnn":
        return {"emb_size": emb, "hidden_size": hidden, "dropout": 0.4, "input_feeding": input_feeding}
    layers, heads, ff_size = TRANSFORMER_SHAPES[size_name_of(size)]
    return {
        "arch": "transformer",
        "emb_size": hidden,
        "hidden_size": hidden,
        "dropout": 0.1,
        "layers": layers,
        "heads": heads,
        "ff_size": ff_size,
    }


def build_variant(
    name: str,
    size: tuple,
    device: torch.device,
    input_feeding: bool,
    amp: bool,
    arch: str = "rnn",
    compile_mode: str = "none",
    buckets: int | None = None,
):
    _, _, src_vocab, tgt_vocab, _ = size
    variant = ARCH_VARIANTS[arch][name]
    compiled = {"compile": compile_mode} if compile_mode != "none" else {}
    bucketed = {"buckets": buckets} if buckets else {}
    cfg = build_config(
        {
            "model": {**model_section(arch, size, input_feeding), **compiled, **variant.get("model", {})},
            "attention": variant.get("attention", {}),
            "train": {"amp": amp, **bucketed, **variant.get("train", {})},
            "decode": {"max_len_ratio": 1.2},
        }
    )
    torch.manual_seed(0)
    model = build_model(cfg, src_vocab, tgt_vocab).to(device)  # compiled as a trial compiles it
    if arch == "rnn" and name in LOOP_AS_BEFORE:
        model.decoder.hoisted = lambda emb: [None] * emb.size(1)  # nothing hoisted: torch.lstm_cell at every step
    return model, cfg


GRAPH_BUCKETS = 5  # length buckets for static-shape modes unless --buckets says otherwise (unmeasured on a GPU)
SUFFIXES = {"default": "+compile", "reduce-overhead": "+reduce-overhead", "graphs": "+graphs"}  # rows per mode


@dataclass
class Contender:
    """One row: a variant, its model.compile mode and length buckets (None: random batches), built and batched."""

    variant: str
    mode: str
    buckets: int | None
    model: nn.Module
    cfg: object
    train_batches: list[Batch]
    decode_batches: list[Batch]


def contender_names(
    variants: list[str], compile_modes: tuple[str, ...] = (), buckets: list[int] | None = None
) -> dict[str, tuple[str, str, int | None]]:
    """Row name -> (variant, model.compile, buckets): every variant eager and in each compile mode, for each bucket
    setting (named ` b<N>` when there are several)."""
    settings = buckets or [None]
    return {
        name + SUFFIXES.get(mode, "") + (f" b{b}" if len(settings) > 1 else ""): (name, mode, b)
        for b in settings
        for mode in ("none", *compile_modes)
        for name in variants
    }


def build_contenders(
    names: dict[str, tuple[str, str, int | None]], size: tuple, device: torch.device, args: dict
) -> dict[str, Contender]:
    """Each row's model (seeded alike) and batches: random ones, or with length buckets as a trial draws them."""
    _, _, src_vocab, tgt_vocab, batch = size
    n_train, n_decode, decode_batch = max(args["steps"], 4), max(args["decode_batches"] + 1, 4), args["decode_batch"]

    def batches(buckets: int | None, n: int, rows: int) -> list[Batch]:
        if buckets is None:
            return synthetic_batches(n, rows, src_vocab, tgt_vocab)
        return bucketed_batches(n, rows, src_vocab, tgt_vocab, buckets)

    contenders = {}
    for row, (name, mode, buckets) in names.items():
        model, cfg = build_variant(name, size, device, args["input_feeding"], args["amp"], args["arch"], mode, buckets)
        contenders[row] = Contender(
            name, mode, buckets, model, cfg, batches(buckets, n_train, batch), batches(buckets, n_decode, decode_batch)
        )
    return contenders


def run(
    device: torch.device,
    size_name: str,
    steps: int,
    decode_batches: int,
    variants: list[str],
    input_feeding: bool,
    amp: bool,
    rounds: int = 1,
    log=print,
    arch: str = "rnn",
    clock: str = "wall",
    compile_modes: tuple[str, ...] = (),
    decode_batch_size: int | None = None,
    buckets: list[int] | None = None,
    on_update: Callable[[dict], None] = lambda results: None,
    require_joeynmt: bool = False,
) -> dict:
    """Training speed is timed in `rounds` rounds that interleave all contenders (joeynmt and every variant, eager
    and in each compile mode, per bucket setting), so drift on a shared machine hits them alike; the table gives each
    one's best round, the JSON every round. Decoding takes batches of `decode_batch_size` sentences (default: the
    training batch), drawn alike. `on_update` gets the results after every round and row (an incremental JSON)."""
    use_tensor_cores(device)  # process-wide, so joeynmt gets TF32 too: the ratio compares the models' code
    size = SIZES[size_name]
    decode_batch = decode_batch_size or size[4]
    results = dict(arch=arch, clock=clock, device=str(device), size=size_name, steps=steps, rounds=rounds)
    results.update(input_feeding=input_feeding, amp=amp, compile=list(compile_modes), buckets=buckets)
    results.update(decode_batch_size=decode_batch, variants={})
    args = dict(steps=steps, decode_batches=decode_batches, decode_batch=decode_batch, arch=arch)
    args.update(input_feeding=input_feeding, amp=amp)
    joey = load_joeynmt(arch, require_joeynmt)
    contenders = build_contenders(contender_names(variants, compile_modes, buckets), size, device, args)
    joey_model = None
    if joey is not None:
        torch.manual_seed(0)
        joey_model = joeynmt_model(joey, arch, size).to(device).train()
    rates, compiling, peaks = train_rounds(contenders, joey_model, device, rounds, clock, log, results, on_update)
    decoded_rows(
        contenders, joey_model, rates, compiling, peaks, device, decode_batches, clock, log, results, on_update
    )
    for row in results["variants"].values():
        row["vs_none"] = vs_none(row, results["variants"])
    on_update(results)
    return results


def decoded_rows(
    contenders: dict[str, Contender],
    joey_model: nn.Module | None,
    rates: dict[str, list[float]],
    compiling: dict[str, float],
    peaks: dict[str, float],
    device: torch.device,
    decode_batches: int,
    clock: str,
    log,
    results: dict,
    on_update: Callable[[dict], None],
) -> None:
    """Each contender's row (joeynmt's first) with its decoding speeds; an error row for one that failed in training
    or decoding, keeping the rounds it finished."""
    failed = results["failed"]
    yardstick = next(iter(contenders.values()))
    joey_row = None
    if joey_model is not None:  # every variant decodes with the same settings, joeynmt the first row's batches
        if "joeynmt" not in failed:
            decoding = (joeynmt_decode_fn, yardstick.cfg, yardstick, rates["joeynmt"], device, decode_batches, clock)
            joey_row = guarded("joeynmt", failed, log, speeds, joey_model, *decoding)
        results["joeynmt"] = joey_row or {"error": failed["joeynmt"], "train_rounds": rates["joeynmt"]}
        on_update(results)
    for name, c in contenders.items():
        row = None
        if name not in failed:
            row = guarded(name, failed, log, variant_row, c, rates[name], device, decode_batches, clock, joey_row)
        if row is None:
            row = dict(variant=c.variant, compile=c.mode, buckets=c.buckets, error=failed[name])
            row.update(train_rounds=rates[name], train_tokens_per_s=max(rates[name], default=None))
        else:
            row["compile_time_s"] += compiling[name]
        row["peak_step_mib"] = peaks.get(name)
        results["variants"][name] = row
        on_update(results)


def vs_none(row: dict, rows: dict[str, dict]) -> float | None:
    """A row's training speed over the baseline's (`none`) in the same compile mode and bucket setting."""
    setting = ("none", row["compile"], row["buckets"])
    base = next((r for r in rows.values() if (r["variant"], r["compile"], r["buckets"]) == setting), None)
    if base is None or not base.get("train_tokens_per_s") or not row.get("train_tokens_per_s"):
        return None
    return row["train_tokens_per_s"] / base["train_tokens_per_s"]


def variant_row(c: Contender, rates: list[float], device, decode_batches: int, clock: str, joeynmt: dict | None):
    """A variant's row: speeds() with </s> banned, its ratio to joeynmt, its setting and its padding; compile_time_s
    the seconds its decoding spent compiling."""
    with torch.no_grad():  # untrained, it would stop after a token or two: ban </s> so that every batch
        c.model.decoder.output.bias[EOS] = float("-inf")  # decodes 1.2 x its longest source, like a trained model
    before = compile_seconds()
    row = speeds(c.model, decode_fn, c.cfg, c, rates, device, decode_batches, clock)
    if joeynmt is not None and rates:
        row["ratio_to_joeynmt"] = row["train_tokens_per_s"] / joeynmt["train_tokens_per_s"]
    row.update(variant=c.variant, compile=c.mode, buckets=c.buckets, padding_share=padding_share(c.train_batches))
    row["compile_time_s"] = compile_seconds() - before
    return row


def train_rounds(
    contenders: dict[str, Contender],
    joey_model: nn.Module | None,
    device: torch.device,
    rounds: int,
    clock: str,
    log,
    results: dict,
    on_update: Callable[[dict], None],
) -> tuple[dict[str, list[float]], dict[str, float], dict[str, float]]:
    """Training tokens/s of every contender (and joeynmt's, on the first row's batches) per round; each contender's
    seconds spent compiling and (CUDA) the most memory its steps took beyond what it held before them (MiB). The
    first round warms each up first: a step compiled or captured per shape on every shape it will meet."""
    steps, failed = results["steps"], results.setdefault("failed", {})
    fns = {name: (train_step_fn, (c.model.train(), c.cfg, device), c.train_batches) for name, c in contenders.items()}
    if joey_model is not None:
        first = next(iter(contenders.values()))
        fns = {"joeynmt": (joeynmt_train_fn, (joey_model, device, results["amp"]), first.train_batches), **fns}
    steps_of = {name: guarded(name, failed, log, build, *args) for name, (build, args, _) in fns.items()}
    rates = {name: [] for name in fns}
    compiling, peaks = dict.fromkeys(contenders, 0.0), {}
    for round_ in range(rounds):
        for name, (_, _, batches) in fns.items():
            if name in failed:  # its error row says what failed; the others' rows go on
                continue
            static = name in contenders and static_shapes(contenders[name].mode)
            warmup = (len(batches) if static else 2) if round_ == 0 else 0
            before, base = compile_seconds(), memory_mark(device)
            rate = guarded(name, failed, log, timed, steps_of[name], batches, steps, device, warmup, CLOCKS[clock])
            if rate is not None:
                rates[name].append(rate)
            if name in contenders:
                compiling[name] += compile_seconds() - before
            if base is not None:
                peaks[name] = max(peaks.get(name, 0.0), (torch.cuda.max_memory_allocated() - base) / 2**20)
            results["rounds_done"] = {name: list(values) for name, values in rates.items()}
            on_update(results)  # after every contender: a step cut short by a time limit keeps the ones before
        log(
            f"  round {round_ + 1}: "
            + ", ".join(f"{n} {rates[n][-1]:.0f}" for n in fns if n not in failed)
            + " train tok/s"
        )
    return rates, compiling, peaks


def guarded(name: str, failed: dict[str, str], log, measure: Callable[..., T], *args) -> T | None:
    """`measure(*args)`, or None with `failed[name]` naming its error: one contender that fails (a capture refused, a
    kernel that does not exist on this device) costs its own row, not the table. Run to the end with a step that
    failed on the device, the later contenders may fail as well, each with its own error row."""
    try:
        return measure(*args)
    except Exception as error:  # noqa: BLE001 - any error of one contender is that contender's row
        failed[name] = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]
        log(f"  {name} failed: {failed[name]}")
        return None


def memory_mark(device: torch.device) -> int | None:
    """On CUDA, reset the peak-memory counter and return what is allocated now; None elsewhere."""
    if device.type != "cuda":
        return None
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def speeds(model: nn.Module, decode: Callable, cfg, c: Contender, rates, device, decode_batches: int, clock) -> dict:
    """A contender's row: its parameters, training rounds and decoding speeds (greedy, beam 10)."""
    row = {
        "n_params": sum(p.numel() for p in model.parameters()),
        "train_tokens_per_s": max(rates, default=None),
        "train_rounds": rates,
    }
    model.eval()
    sentences = c.decode_batches[0].src.size(0)
    # a captured search records its graphs per batch shape: every batch is decoded once before the clock starts,
    # so that no timed batch records (an eager search warms up on one)
    warmup = len(c.decode_batches) if decode is decode_fn and static_shapes(c.mode) else 1
    for beam, key in ((1, "greedy"), (10, "beam10")):
        produced: list[int] = []
        row[f"{key}_sentences_per_s"] = timed(
            decode(model, cfg, device, beam, produced), c.decode_batches, decode_batches, device, warmup, CLOCKS[clock]
        )
        row[f"{key}_tokens_per_sentence"] = sum(produced[warmup:]) / (decode_batches * sentences)  # timed calls'
    return row


def table(results: dict) -> str:
    lines = [
        f"{results.get('arch', 'rnn')}, device {results['device']}, size {results['size']}, best of "
        f"{results['rounds']} rounds of {results.get('clock', 'wall')}-clock time, "
        f"{results['steps']} steps, "
        f"input feeding {results['input_feeding']}, amp {results['amp']}, compile "
        f"{', '.join(results['compile']) or 'none'}, "
        f"buckets {results.get('buckets') or 'none (random batches)'}"
        + (
            ", training not timed"
            if not results["rounds"]
            else ""
            if "joeynmt" in results
            else ", joeynmt not installed (benchmarks/install_joeynmt.sh)"
        ),
        f"decoding: batches of {results['decode_batch_size']} sentences, </s> banned, so "
        "every sentence runs to 1.2 x its batch's longest source (out len)",
        "vs none: against the eager baseline of the same bucket setting for eager rows, the baseline in the same "
        "mode for the others; compile s: seconds spent compiling or capturing (warm-up calls, not timed); padding: "
        "share of target positions; peak MiB: memory a training step took beyond the model's (CUDA)",
        "| variant | params | train tok/s | vs none | vs joeynmt | greedy sent/s (out len) "
        "| beam-10 sent/s (out len) | compile s | padding | peak MiB |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = {"joeynmt 2.3": {**results["joeynmt"], "compile_time_s": 0.0}} if "joeynmt" in results else {}
    for name, row in {**rows, **results["variants"]}.items():
        lines.append(table_row(name, row))
    return "\n".join(lines)


def table_row(name: str, row: dict) -> str:
    """One contender's line: its speeds, ratios to its mode's baseline and to joeynmt, compile seconds, padding;
    for one that failed, its best training round if it finished one, and its error."""
    if "error" in row:
        trained = f"{row['train_tokens_per_s']:.0f}" if row.get("train_tokens_per_s") else "-"
        return f"| {name} | - | {trained} | - | - | failed: {row['error']} | | | | |"
    ratio = f"{row['ratio_to_joeynmt']:.2f}x" if "ratio_to_joeynmt" in row else "-"
    to_none = f"{row['vs_none']:.2f}x" if row.get("vs_none") else "-"
    trained = f"{row['train_tokens_per_s']:.0f}" if row["train_rounds"] else "-"
    padding = f"{row['padding_share']:.0%}" if "padding_share" in row else "-"
    peak = f"{row['peak_step_mib']:.0f}" if row.get("peak_step_mib") is not None else "-"
    return (
        f"| {name} | {row['n_params'] / 1e6:.1f}M | {trained} | {to_none} | {ratio} | "
        f"{row['greedy_sentences_per_s']:.1f} ({row['greedy_tokens_per_sentence']:.0f}) | "
        f"{row['beam10_sentences_per_s']:.1f} ({row['beam10_tokens_per_sentence']:.0f}) | "
        f"{row['compile_time_s']:.0f} | {padding} | {peak} |"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--arch", choices=list(ARCH_VARIANTS), default="rnn")
    parser.add_argument("--device", choices=["cpu", "cuda", "all"], default="all")
    parser.add_argument("--size", choices=list(SIZES), default="paper")
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per variant")
    parser.add_argument(
        "--rounds", type=int, default=3, help="interleaved training rounds (the best one counts; 0: decoding only)"
    )
    parser.add_argument("--decode-batches", type=int, default=2, help="timed decoding batches per variant and beam")
    parser.add_argument(
        "--decode-batch-size", type=int, help="sentences per decoding batch (default: the size's training batch)"
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=sorted({v for vs in ARCH_VARIANTS.values() for v in vs}),
        help="default: all of --arch's",
    )
    parser.add_argument("--no-input-feeding", action="store_true", help="one cuDNN call for the decoder RNN")
    parser.add_argument(
        "--amp", action="store_true", help="bf16 autocast, for joeynmt too (CUDA, or a CPU with native bf16)"
    )
    parser.add_argument("--compile", action="store_true", help="time every variant compiled too (model.compile)")
    parser.add_argument(
        "--compile-mode",
        nargs="+",
        choices=list(SUFFIXES),
        default=["default"],
        help="model.compile modes with --compile, each a row per variant: default (Inductor), reduce-overhead "
        "(Inductor and CUDA graph trees), graphs (the eager step captured as CUDA graphs; CUDA only)",
    )
    parser.add_argument(
        "--buckets",
        nargs="+",
        type=int,
        help="train on batches in length buckets as a trial draws them, once per value (train.buckets; 0: sorted "
        "pools); default: random batches, or train.buckets' default with a static-shape compile mode",
    )
    parser.add_argument("--joeynmt", action="store_true", help="fail unless joeynmt imports (a run that needs it)")
    parser.add_argument("--json", help="write the results here (after every round and row, so a crash keeps them)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's; 1 on a CPU others share)")
    parser.add_argument(
        "--clock",
        choices=list(CLOCKS),
        default="wall",
        help="cpu: per second of this process's CPU time (a shared CPU, with --threads 1)",
    )
    args = parser.parse_args(argv)
    args.variants = args.variants or list(ARCH_VARIANTS[args.arch])
    unknown = sorted(set(args.variants) - set(ARCH_VARIANTS[args.arch]))
    if unknown:
        parser.error(
            f"--variants: {', '.join(unknown)} not among --arch {args.arch}'s: " + ", ".join(ARCH_VARIANTS[args.arch])
        )
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    compile_modes = tuple(args.compile_mode) if args.compile else ()
    buckets = args.buckets
    if buckets is None and any(static_shapes(mode) for mode in compile_modes):
        buckets = [GRAPH_BUCKETS]  # a captured step needs shapes that repeat
    if args.device == "cuda" and not torch.cuda.is_available():  # asked for by name: no silent CPU-only run
        print(f"throughput.py: --device cuda, but torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    devices = ["cpu", "cuda"] if args.device == "all" else [args.device]
    devices = [d for d in devices if d == "cpu" or torch.cuda.is_available()]
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads"
        + (f", {torch.cuda.get_device_name()}" if torch.cuda.is_available() else "")
    )
    done: list[dict] = []

    def save(runs: list[dict]) -> None:
        if args.json:
            Path(args.json).write_text(json.dumps(runs, indent=2))

    for device in devices:
        print(f"{device}:")
        try:
            results = run(
                torch.device(device),
                args.size,
                args.steps,
                args.decode_batches,
                args.variants,
                not args.no_input_feeding,
                args.amp,
                args.rounds,
                arch=args.arch,
                clock=args.clock,
                compile_modes=compile_modes,
                decode_batch_size=args.decode_batch_size,
                buckets=buckets,
                on_update=lambda partial: save([*done, partial]),
                require_joeynmt=args.joeynmt,
            )
        except JoeyNMTMissing as error:
            print(f"throughput.py: {error}", file=sys.stderr)
            return 2
        done.append(results)
        save(done)
        print(table(results))
    failed = {name: error for results in done for name, error in results["failed"].items()}
    for name, error in failed.items():
        print(f"throughput.py: {name} failed: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
