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

from nmt_core.architectures import build_model
from nmt_core.config import TrialConfig, build_config
from nmt_core.data import SPECIALS, Segmenter, Vocab
from nmt_core.model import Seq2Seq
from nmt_core.yaml_input import SHOWN_CHARS

LAST, BEST = "last.pt", "best.pt"
# 2: SACT eq. 2 without a bias (attention.sact_bias), `word` tokens with joiners. Older files are refused.
FORMAT = 2


class CheckpointError(ValueError):
    """A checkpoint this version cannot use; the message is one line naming the file."""


def save(obj: dict[str, Any], path: Path) -> None:
    """Write to a temporary name, then rename: a crash never leaves a half-written checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load(path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError):
        raise
    except Exception as err:  # truncated, corrupt, or not a checkpoint at all: torch's errors run to 30 lines
        reason = str(err).strip().splitlines()[0][:120] if str(err).strip() else type(err).__name__
        raise CheckpointError(f"{path}: not a readable checkpoint ({reason}); is the file complete?") from None
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not an nmt checkpoint (no model weights in it)")
    if state.get("format", 1) != FORMAT:
        raise CheckpointError(
            f"{path}: checkpoint format {state.get('format', 1)} was written by an earlier version "
            f"(SACT eq. 2 had a bias, `word` tokens had no joiners); this version reads format "
            f"{FORMAT}: train again, or translate with the version that wrote it"
        )
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
    if path.is_dir():
        path = next((path / name for name in (BEST, LAST) if (path / name).exists()), path / BEST)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint here (train with `nmt train ... --out DIR` first)")
    return path


def _vocab(state: dict[str, Any], side: str, size: int, path: Path) -> Vocab:
    """One side's vocabulary as training wrote it: the specials, then at most data.<side>_vocab words."""
    words = state.get("vocab", {}).get(side) if isinstance(state.get("vocab"), dict) else None
    if (
        not isinstance(words, list)
        or words[: len(SPECIALS)] != SPECIALS
        or len(words) > size + len(SPECIALS)
        or not all(isinstance(w, str) for w in words)
    ):
        raise CheckpointError(
            f"{path}: vocab.{side}: not a vocabulary (a list of words: {', '.join(SPECIALS)}, "
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
    if not isinstance(state.get("config"), dict):
        raise CheckpointError(f"{path}: config: not a trial config (a mapping of sections data, model, ...)")
    cfg = build_config(state["config"], source=str(path))
    src_vocab, tgt_vocab = (
        _vocab(state, side, limit, path) for side, limit in (("src", cfg.data.src_vocab), ("tgt", cfg.data.tgt_vocab))
    )
    model = build_model(cfg.model, cfg.attention, len(src_vocab), len(tgt_vocab))
    if "best_model" in state:
        log(
            f"{path}: using the best-dev weights (epoch {state['best_epoch']}), not the last epoch's ({state['epoch']})"
        )
    try:
        model.load_state_dict(state.get("best_model", state["model"]))
    except (RuntimeError, TypeError, AttributeError) as err:  # torch lists every mismatch, one per line
        reason = next((line.strip() for line in str(err).splitlines()[1:] if line.strip()), str(err).strip())
        reason = reason if len(reason) <= SHOWN_CHARS else f"{reason[:SHOWN_CHARS]}..."
        raise CheckpointError(f"{path}: model: the weights do not fit the config ({reason})") from None
    subword = state.get("subword", {})
    return LoadedModel(
        cfg,
        model.eval(),
        src_vocab,
        tgt_vocab,
        Segmenter(cfg.data, subword.get("src")),
        Segmenter(cfg.data, subword.get("tgt")),
    )
