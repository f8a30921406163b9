"""A trial's heatmaps, drawn by the trial (`tracking.plots: all`) or by the summary (`best`), and the temperature
heatmaps of the summary's figures: temperature per target word (SACT Figure 2), per Transformer head, and attention
weights with the sentinel gate. The summary's other charts: sweeper/summary/charts.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def heatmaps(figures: dict[str, Any], folder: Path) -> None:
    """A trial's heatmaps from its traces/heatmaps.json (sweeper.artifacts.heatmap_data): the temperature heatmap
    (SACT only) and one attention heatmap per sentence, into folder."""
    folder.mkdir(parents=True, exist_ok=True)
    sentences = figures["sentences"]
    if figures["lambda"] is not None and sentences:
        temperature_heatmap(
            [(s["target"], s["tau"]) for s in sentences], folder / "temperature_heatmap.png", figures["lambda"]
        )
    heads = figures.get("heads")
    if heads:
        head_temperature_heatmap(
            heads["target"],
            heads["tau_heads"],
            heads["labels"],
            folder / "temperature_heads.png",
            figures["lambda"],
            "dev sentence 0",
        )
    for s in sentences:
        attention_heatmap(
            s["source"],
            s["target"],
            np.array(s["weights"]),
            folder / f"attention_dev{s['index']}.png",
            s["gate"],
            title=f"dev sentence {s['index']}",
        )


def temperature_heatmap(sentences: list[tuple[list[str], list[float]]], path: Path, lam: float) -> None:
    """One row per sentence, one cell per target word, coloured by tau_t on its full range (1/lambda, lambda).

    Dark = low temperature = sharp attention (SACT Figure 2); each cell also prints its value.
    """
    width = max(len(words) for words, _ in sentences)
    fig, axes = plt.subplots(
        len(sentences),
        1,
        figsize=(max(6, 0.8 * width), 1.5 * len(sentences) + 0.5),
        squeeze=False,
        gridspec_kw={"hspace": 1.2},
    )
    norm = matplotlib.colors.LogNorm(vmin=1 / lam, vmax=lam)  # tau = lambda^beta: beta is linear in log tau
    for ax, (words, taus) in zip(axes[:, 0], sentences):
        image = ax.imshow(np.array([taus]), cmap="gray", aspect="auto", norm=norm)
        for x, tau in enumerate(taus):
            ax.text(x, 0, f"{tau:.2f}", ha="center", va="center", fontsize=7, color="white" if tau < 1 else "black")
        ax.set_xticks(range(len(words)), words, rotation=45, ha="right", fontsize=8)
        ax.set_yticks([])
    tau_ticks(fig.colorbar(image, ax=axes[:, 0].tolist(), label="temperature tau_t"), lam)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def tau_ticks(bar, lam: float) -> None:
    """A temperature colour bar's ticks as plain numbers (1/lambda, 0.5, 1, 2, lambda), not a log axis' 10^x."""
    ticks = sorted({1 / lam, *(t for t in (0.5, 1.0, 2.0) if 1 / lam < t < lam), lam})
    bar.set_ticks(ticks, labels=[f"{t:.2g}" for t in ticks])
    bar.ax.minorticks_off()


def head_temperature_heatmap(
    words: list[str], tau_heads: list[list[float]], labels: list[str], path: Path, lam: float, title: str = ""
) -> None:
    """A Transformer's tau per tempered head (rows, `l<layer>.<block>.h<head>`) for each target word (columns), on
    the same scale as temperature_heatmap: which layers and heads sharpen or flatten where."""
    matrix = np.array(tau_heads).T
    fig, ax = plt.subplots(figsize=(max(5, 0.6 * len(words) + 2), max(2.5, 0.25 * len(labels) + 1)))
    image = ax.imshow(matrix, cmap="gray", aspect="auto", norm=matplotlib.colors.LogNorm(vmin=1 / lam, vmax=lam))
    ax.set_xticks(range(len(words)), words, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels, fontsize=6)
    ax.set_title(title, fontsize=9)
    tau_ticks(fig.colorbar(image, ax=ax, label="temperature tau"), lam)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)


def attention_heatmap(
    source: list[str],
    target: list[str],
    weights: np.ndarray,
    path: Path,
    gate: list[float] | None = None,
    title: str = "",
) -> None:
    """Target x source attention weights; the sentinel gate (if any) as an extra last column."""
    matrix, columns = weights, list(source)
    if gate is not None:
        matrix, columns = np.column_stack([weights, gate]), columns + ["<sentinel>"]
    fig, ax = plt.subplots(figsize=(max(4, 0.45 * len(columns) + 1.5), max(3, 0.4 * len(target) + 1)))
    image = ax.imshow(matrix, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(columns)), columns, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(target)), target, fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.colorbar(image, ax=ax)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
