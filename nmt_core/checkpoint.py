"""Checkpoint files: `last.pt` (everything exact resume needs) and `best.pt` (what translation needs).

Only tensors, numbers, strings, lists and dicts go in, so everything is read back with
`torch.load(..., weights_only=True)`: a checkpoint from someone else cannot run code.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nmt_core.config import TrialConfig, build_config
from nmt_core.data import Segmenter, Vocab
from nmt_core.model import Seq2Seq

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
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state.get("format", 1) != FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {state.get('format', 1)} was written by an earlier version "
                              f"(SACT eq. 2 had a bias, `word` tokens had no joiners); this version reads format "
                              f"{FORMAT}: train again, or translate with the version that wrote it")
    return state


def save_epoch(directory: Path, state: dict[str, Any], is_best: bool) -> None:
    save(state, directory / LAST)
    if is_best:
        save({"format": FORMAT, "model": state["model"], "config": state["config"], "vocab": state["vocab"],
              "subword": state.get("subword", {}), "epoch": state["epoch"]}, directory / BEST)


@dataclass
class LoadedModel:
    config: TrialConfig
    model: Seq2Seq
    src_vocab: Vocab
    tgt_vocab: Vocab
    src_segmenter: Segmenter
    tgt_segmenter: Segmenter


def load_for_inference(directory: str | Path) -> LoadedModel:
    """The best model in a training output folder (or a single .pt file), in eval mode, on the CPU."""
    path = Path(directory)
    path = path / BEST if path.is_dir() else path
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint here (train with `nmt train ... --out DIR` first)")
    state = load(path)
    cfg = build_config(state["config"], source=str(path))
    src_vocab, tgt_vocab = Vocab(state["vocab"]["src"]), Vocab(state["vocab"]["tgt"])
    model = Seq2Seq(cfg.model, cfg.attention, len(src_vocab), len(tgt_vocab))
    model.load_state_dict(state["model"])
    subword = state.get("subword", {})
    return LoadedModel(cfg, model.eval(), src_vocab, tgt_vocab, Segmenter(cfg.data, subword.get("src")),
                       Segmenter(cfg.data, subword.get("tgt")))
