"""Checkpoint files: `last.pt` (everything exact resume needs) and `best.pt` (what translation needs).

Only tensors, numbers, strings, lists and dicts go in, so everything is read back with
`torch.load(..., weights_only=True)`: a checkpoint from someone else cannot run code.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt_core.config import TrialConfig, build_config
from nmt_core.data.batches import SPECIALS, Segmenter, Vocab
from nmt_core.gates.gate import MAX_CHECKPOINT_BYTES, SHOWN_CHARS, clip, clip_path, open_regular, shown, write_with
from nmt_core.models.build import build_model
from nmt_core.models.rnn import Seq2Seq

LAST, BEST = "last.pt", "best.pt"
# 2: SACT eq. 2 without a bias (attention.sact_bias), `word` tokens with joiners. Older files are refused.
FORMAT = 2


class CheckpointError(ValueError):
    """A checkpoint this version cannot use; the message is one line naming the file."""


def save(obj: dict[str, Any], path: Path) -> None:
    """`obj` saved to `path` through the project's one atomic writer (nmt_core/gates/gate.py: write_with): a crash never
    leaves a half-written checkpoint, and nothing is written through a link."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_with(path.parent, path.name, lambda handle: torch.save(obj, handle), _checkpoint_error)


MAX_WEIGHTS = MAX_CHECKPOINT_BYTES // 4  # a model whose float32 weights alone fill such a file: none is larger
INTEGERS = ("format", "epoch", "best_epoch")  # shown in lines and compared: plain integers, never a 5 MB string


def _checkpoint_error(key: str, message: str, source: str) -> CheckpointError:
    return CheckpointError(f"{source}: {message}" if key == "(file)" else f"{source}: {key}: {message}")


def load(path: Path, within: Path | None = None) -> dict[str, Any]:
    """A checkpoint file through the gate (nmt_core/gates/gate.py: a regular file, not a FIFO or device, at most
    MAX_CHECKPOINT_BYTES; with `within`, below that folder and no link), loaded with weights_only=True, its fields
    checked before anything shows or uses them."""
    with open_regular(path, _checkpoint_error, within) as (fd, info):
        if info.st_size > MAX_CHECKPOINT_BYTES:
            raise CheckpointError(f"{clip_path(path)}: larger than {MAX_CHECKPOINT_BYTES:,} bytes; not a checkpoint")
        try:
            with os.fdopen(os.dup(fd), "rb") as handle:
                state = torch.load(handle, map_location="cpu", weights_only=True)
        except Exception as err:  # truncated, corrupt, or not a checkpoint at all: torch's errors run to 30 lines
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise CheckpointError(
                f"{clip_path(path)}: not a readable checkpoint ({clip(reason, 120)}); is the file complete?"
            ) from None
    return check_state(state, path)


def check_state(state: Any, path: Path) -> dict[str, Any]:
    """A loaded checkpoint's fields as this version wrote them: a mapping with weights, integer format and epochs,
    a mapping for the config, vocabularies and subwords; each refused in one line naming it."""
    where = clip_path(path)
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{where}: not an nmt checkpoint (no model weights in it)")
    needed = ("epoch", "best_epoch") if "best_model" in state else ()  # the log line names both epochs
    for key in INTEGERS:
        if (key in state or key in needed) and (
            isinstance(state.get(key), bool) or not isinstance(state.get(key), int)
        ):
            raise CheckpointError(f"{where}: {key}: must be an integer (got {shown(state.get(key))})")
    if state.get("format", 1) != FORMAT:
        raise CheckpointError(
            f"{where}: checkpoint format {state.get('format', 1)} was written by an earlier version "
            f"(SACT eq. 2 had a bias, `word` tokens had no joiners); this version reads format "
            f"{FORMAT}: train again, or translate with the version that wrote it"
        )
    if not isinstance(state.get("config"), dict):
        raise CheckpointError(f"{where}: config: not a trial config (a mapping of sections data, model, ...)")
    for key in ("vocab", "subword"):
        if key in state and not isinstance(state[key], dict):
            raise CheckpointError(f"{where}: {key}: not a mapping (got {shown(state[key])})")
    return state


def load_resume(folder: Path) -> dict[str, Any]:
    """The last.pt a run continues from (`nmt train --out`, a retried or PBT trial): read as `load` reads, from
    `folder` itself (no link, nothing outside it), and its weights checked against the model its config describes
    before training builds one (check_weights: laid out on the meta device), so a small file naming a huge model,
    or weights that do not fit, is one line."""
    state = load(folder / LAST, within=folder)
    check_weights(state, folder / LAST)
    return state


def save_epoch(directory: Path, state: dict[str, Any], is_best: bool) -> None:
    save(state, directory / LAST)
    if is_best:
        save(
            {
                "format": FORMAT,
                "model": state["model"],
                "config": state["config"],
                "vocab": state["vocab"],
                "subword": state.get("subword", {}),
                "epoch": state["epoch"],
            },
            directory / BEST,
        )


@dataclass
class LoadedModel:
    config: TrialConfig
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_segmenter: Segmenter
    tgt_segmenter: Segmenter


def checkpoint_file(directory: str | Path) -> Path:
    """best.pt in a training output folder, else last.pt (what a Ray Tune trial checkpoint holds), or the file."""
    path = Path(directory)
    try:
        if path.is_dir():
            path = next((path / name for name in (BEST, LAST) if (path / name).exists()), path / BEST)
        found = path.exists()
    except (OSError, ValueError) as err:  # a name no path can be: too long, or holding a NUL
        raise CheckpointError(f"{clip_path(path)}: cannot read ({getattr(err, 'strerror', None) or err})") from None
    if not found:
        raise CheckpointError(f"{clip_path(path)}: no checkpoint here (train with `nmt train ... --out DIR` first)")
    return path


def _vocab(state: dict[str, Any], side: str, size: int, path: Path | str) -> Vocab:
    """One side's vocabulary as training wrote it: the specials, then at most data.<side>_vocab words."""
    words = state.get("vocab", {}).get(side) if isinstance(state.get("vocab"), dict) else None
    if (
        not isinstance(words, list)
        or words[: len(SPECIALS)] != SPECIALS
        or len(words) > size + len(SPECIALS)
        or not all(isinstance(w, str) for w in words)
    ):
        raise CheckpointError(
            f"{clip_path(path)}: vocab.{side}: not a vocabulary (a list of words: {', '.join(SPECIALS)}, "
            f"then at most data.{side}_vocab={size:,} words)"
        )
    return Vocab(words)


def load_for_inference(directory: str | Path, log: Callable[[str], None] = lambda line: None) -> LoadedModel:
    """The best-dev model of a training output folder, a Ray trial checkpoint or a .pt file, in eval mode.

    last.pt holds the last epoch's weights and, beside them, the best-dev ones behind the reported test BLEU:
    those are the ones used, and `log` says so.
    """
    path = checkpoint_file(directory)
    state = load(path)
    cfg, src_vocab, tgt_vocab = check_weights(state, path)
    model = build_model(cfg.model, cfg.attention, len(src_vocab), len(tgt_vocab))
    if "best_model" in state:
        log(
            f"{clip_path(path)}: using the best-dev weights (epoch {state['best_epoch']}), "
            f"not the last epoch's ({state['epoch']})"
        )
    model.load_state_dict(state.get("best_model", state["model"]))
    subword = state.get("subword", {})
    return LoadedModel(
        cfg,
        model.eval(),
        src_vocab,
        tgt_vocab,
        Segmenter(cfg.data, subword.get("src")),
        Segmenter(cfg.data, subword.get("tgt")),
    )


def check_weights(state: dict[str, Any], path: Path | str) -> tuple[TrialConfig, Vocab, Vocab]:
    """The checkpoint's config and vocabularies, and its weights checked against the model they describe before
    that model is built: the model is laid out on PyTorch's meta device (shapes, no memory), so a few-kB file whose
    config names a 30 GB model is refused in one line instead of allocating it. The model is at most MAX_WEIGHTS, and
    each tensor is stored whole: an expanded view (stride 0) gives a 3 MB file a 25 GB model's shapes."""
    cfg = build_config(state["config"], source=str(path))
    src_vocab, tgt_vocab = (
        _vocab(state, side, limit, path) for side, limit in (("src", cfg.data.src_vocab), ("tgt", cfg.data.tgt_vocab))
    )
    with torch.device("meta"):
        wanted = build_model(cfg.model, cfg.attention, len(src_vocab), len(tgt_vocab)).state_dict()
    total = sum(v.numel() for v in wanted.values())
    for key in ("model", "best_model"):  # last.pt holds both; best.pt the model only
        weights = state.get(key, {} if key == "model" else None)
        held = weights if isinstance(weights, dict) else {}
        if weights is not None and (mismatch := _first_mismatch(wanted, held)):
            tensors = sum(v.numel() for v in held.values() if isinstance(v, torch.Tensor))
            raise CheckpointError(
                f"{clip_path(path)}: {key}: the weights do not fit the config ({mismatch}; the config describes "
                f"{total:,} weights, the file holds {tensors:,})"
            )
    if total > MAX_WEIGHTS:
        raise CheckpointError(
            f"{clip_path(path)}: config: describes a model of {total:,} weights, more than the {MAX_WEIGHTS:,} a "
            f"checkpoint of at most {MAX_CHECKPOINT_BYTES:,} bytes holds"
        )
    return cfg, src_vocab, tgt_vocab


def _first_mismatch(wanted: dict[str, torch.Tensor], held: dict[Any, Any]) -> str | None:
    """The first tensor the model needs that the file lacks or holds in another shape, or an entry it does not
    need."""
    for key, tensor in wanted.items():
        if not isinstance(held.get(key), torch.Tensor):
            return f"missing {clip(key, SHOWN_CHARS)}"
        if held[key].shape != tensor.shape:
            return f"size mismatch for {clip(key, SHOWN_CHARS)}: {tuple(held[key].shape)} in the file"
        if held[key].untyped_storage().nbytes() < held[key].numel() * held[key].element_size():
            return f"{clip(key, SHOWN_CHARS)} is not stored whole (an expanded view of fewer numbers)"
    extra = next((key for key in held if key not in wanted), None)
    return f"unexpected {clip(str(extra), SHOWN_CHARS)}" if extra is not None else None
