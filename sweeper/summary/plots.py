"""Every figure the sweeper draws, in one place: a trial's heatmaps, drawn by the trial (`tracking.plots: all`) or
by the summary (`best`); the summary's temperature heatmaps (temperature per target word, SACT Figure 2; per
Transformer head; attention weights with the sentinel gate), its fixed-tau curve (SACT Figure 1), dev BLEU per
epoch and parallel coordinates over a sweep's trials. Here, not in sweeper/summary/, because trials draw too
(sweeper/running/artifacts.py) and `sweeper.summary.plots.heatmaps` is how a user redraws a trial's heatmaps
(docs/sweeps.md). What each summary figure shows, from which data, is sweeper/summary/figures.py's job; this module only
draws."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def heatmaps(figures: dict[str, Any], folder: Path) -> None:
    """A trial's heatmaps from its traces/heatmaps.json (sweeper.running.artifacts.heatmap_data): the temperature
    heatmap (SACT only) and one attention heatmap per sentence, into folder."""
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


def fixed_tau_curve(
    points: list[tuple[float, float, float, float]],
    bands: list[tuple[str, float, float, float]],
    paths: list[Path],
    ylabel: str = "test BLEU",
) -> None:
    """SACT Figure 1: BLEU against a fixed temperature, (tau, mean, low, high) joined as a curve with each point's
    seed interval as a bar; SACT and the learned temperature, (label, mean, low, high), as horizontal lines with
    their seed intervals shaded across the whole tau axis."""
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    taus, means, lows, highs = (np.array(column) for column in zip(*sorted(points)))
    ax.errorbar(
        taus, means, yerr=[means - lows, highs - means], marker="o", color="black", capsize=3, label="fixed tau"
    )
    colours = plt.get_cmap("tab10")
    for i, (label, mean, low, high) in enumerate(bands):
        colour = colours(i % 10)
        ax.axhline(mean, color=colour, linestyle="--", label=label)
        ax.axhspan(low, high, color=colour, alpha=0.12, linewidth=0)
    ax.set_xticks(taus, [f"{t:g}" for t in taus])
    ax.set_xlabel("fixed temperature tau")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path, dpi=120)
    plt.close(fig)


def dev_curves(variants: list[tuple[str, list[list[float]]]], path: Path, colours: list[str] | None = None) -> None:
    """Dev BLEU per epoch, one colour per variant (`colours`, one a variant: those of its runs in MLflow; else
    matplotlib's cycle): has training converged?

    The bold line is the mean over seeds, drawn only as far as every seed has the epoch; past it a dashed line
    goes on with the mean over the seeds still training (a mean of fewer seeds, and of the ones early stopping
    kept, so drawn apart, but without it a 16-epoch study's mean ended where its first seed stopped). Each seed is
    also drawn thin to its own last epoch, where an `x` marks a seed that ended before the variant's longest one
    (early stopping, or the scheduler)."""
    legend_lines = -(-len(variants) // 2)  # two columns, below the axes
    fig, ax = plt.subplots(figsize=(7, 4.2 + 0.18 * legend_lines), layout="constrained")
    for i, (label, seeds) in enumerate(variants):
        seeds = [curve for curve in seeds if curve]
        if not seeds:
            continue
        common = min(len(curve) for curve in seeds)
        longest = max(len(curve) for curve in seeds)
        epochs = np.arange(1, longest + 1)
        mean = np.array([np.mean([curve[e - 1] for curve in seeds if len(curve) >= e]) for e in epochs])  # who ran e
        colour = colours[i] if colours else None
        (line,) = ax.plot(
            epochs[:common], mean[:common], marker="o", markersize=3, linewidth=1.8, label=label, color=colour
        )
        if longest > common:
            ax.plot(epochs[common - 1 :], mean[common - 1 :], color=line.get_color(), linestyle="--", linewidth=1.2)
        for curve in seeds:
            x = np.arange(1, len(curve) + 1)
            ax.plot(x, curve, color=line.get_color(), linewidth=0.7, alpha=0.35)
            if len(curve) < longest:
                ax.plot(x[-1], curve[-1], marker="x", markersize=5, color=line.get_color(), alpha=0.7)
    ax.set_xlabel("epoch")
    ax.set_ylabel("dev BLEU (greedy)")
    ax.grid(alpha=0.3)
    # below the axes: inside, long labels (`... (train.lr=0.002 chosen)`) covered the first epochs' curves
    fig.legend(fontsize=7, ncol=2, loc="outside lower center")
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parallel_coordinates(axes_values: dict[str, list], objective: list[float], objective_name: str, path: Path) -> None:
    """One line per trial through one axis per varying parameter, ending on the objective, coloured by it.

    Numbers keep their scale (log when they span more than 10x), anything else gets one evenly spaced
    position per value; missing values (a parameter inactive for that trial's variant) sit at `n/a`.
    """
    names = list(axes_values) + [objective_name]
    columns, ticks = [], []
    for name in axes_values:
        position, labels = _axis(axes_values[name])
        columns.append(position)
        ticks.append(labels)
    low, high = min(objective), max(objective)
    span = (high - low) or 1.0
    columns.append([(v - low) / span for v in objective])
    ticks.append([(i / 4, f"{low + i / 4 * span:.2f}") for i in range(5)])
    fig, ax = plt.subplots(figsize=(max(6, 1.9 * len(names)), 4.5))
    colours = plt.get_cmap("viridis")
    many = len(objective) > 100  # a large sweep's lines thin and light; the highest objective drawn last, on top
    for i in sorted(range(len(objective)), key=lambda i: objective[i]):
        ax.plot(
            range(len(names)),
            [column[i] for column in columns],
            color=colours((objective[i] - low) / span),
            alpha=0.35 if many else 0.8,
            linewidth=0.6 if many else 1.4,
        )
    for x, labels in enumerate(ticks):
        ax.axvline(x, color="black", linewidth=0.8)
        for y, label in labels:
            ax.text(x + 0.03, y, label, fontsize=7, va="center")
    ax.set_xticks(range(len(names)), names, rotation=15, fontsize=8)
    ax.set_yticks([])
    ax.set_ylim(-0.08, 1.08)
    ax.set_xlim(-0.2, len(names) - 0.6)
    for side in ("left", "right", "top"):
        ax.spines[side].set_visible(False)
    image = plt.cm.ScalarMappable(cmap=colours, norm=matplotlib.colors.Normalize(low, high))
    fig.colorbar(image, ax=ax, label=objective_name, pad=0.01)
    ax.set_title(f"{len(objective)} trials", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _axis(values: list) -> tuple[list[float], list[tuple[float, str]]]:
    """Positions in [0, 1] and (position, label) ticks for one parameter's values."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if numbers and all(v is None or v in numbers for v in values) and len(set(numbers)) > 2:
        # a number only some variants have (attention.tau) keeps its scale above `n/a`, not a tick per value
        log = min(numbers) > 0 and max(numbers) / min(numbers) > 10
        scale = (lambda v: float(np.log10(v))) if log else float
        low, high = scale(min(numbers)), scale(max(numbers))
        bottom = 0.12 if len(numbers) < len(values) else 0.0
        span = ((high - low) or 1.0) / (1 - bottom)
        marks = sorted(set(numbers))
        ticks = [(bottom + (scale(v) - low) / span, f"{v:.3g}") for v in (marks[0], marks[len(marks) // 2], marks[-1])]
        return (
            [0.0 if v is None else bottom + (scale(v) - low) / span for v in values],
            ticks + ([(0.0, "n/a")] if bottom else []),
        )
    labels = sorted({"n/a" if v is None else str(v) for v in values})
    where = {label: (i / (len(labels) - 1) if len(labels) > 1 else 0.5) for i, label in enumerate(labels)}
    return [where["n/a" if v is None else str(v)] for v in values], [(y, label) for label, y in where.items()]


def pareto_plot(points: list[tuple[str, float, float, float, float, str]], names: tuple[str, str], path: Path) -> None:
    """Rows on two objectives: (label, x, y, x std, y std, status) with status front, dominated or within noise.
    The front's points are joined in x order; a row dominated significantly is a cross, one dominated by means only
    an open circle (not distinguishable from the front over its seeds)."""
    fig, ax = plt.subplots(figsize=(7, 5))
    marker = {"front": ("o", "C0", "front"), "dominated": ("x", "C3", "dominated (significant over seeds)")}
    for label, x, y, sx, sy, status in points:
        shape, colour, name = marker.get(status, ("o", "C1", "dominated by means only"))
        face = "none" if status not in marker else colour
        ax.errorbar(x, y, xerr=sx or None, yerr=sy or None, fmt=shape, color=colour, mfc=face, label=name, capsize=2)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    front = sorted((x, y) for _, x, y, _, _, status in points if status == "front")
    if len(front) > 1:
        ax.plot(*zip(*front), color="C0", linewidth=0.8, alpha=0.6)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=8)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title("Pareto front (mean ± std over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
