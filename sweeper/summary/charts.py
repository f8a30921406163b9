"""The summary's charts: the fixed-tau curve (SACT Figure 1), dev BLEU per epoch, and parallel coordinates over a
sweep's trials. The heatmaps a trial draws too are in sweeper/plots.py."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


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
