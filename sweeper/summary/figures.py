"""Figures and the word tables drawn from attention traces: their data first (from the summary and the snapshot's
traces, no tracking server), then the drawing. Dev BLEU curves, the fixed-tau curve (SACT Figure 1), the temperature
heatmap (Figure 2), sentinel words (Li & Zhu Table 2), mean tau / gate for function versus content words, parameter
importance and parallel coordinates.
"""
from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from nmt_core.registry import is_adaptive
from sweeper import importance, plots
from sweeper.summary.records import TrialRecord, best_of, has_gate_or_sact
from sweeper.summary.statistics import Summary, objective_of

FREQUENT_WORDS = 50  # the target's most frequent words stand for function words (no stop-word lists yet)
SENTINEL_THRESHOLD = 0.9  # Li & Zhu Table 2
HEATMAP_SENTENCES = 4


@dataclass
class WordRow:
    """Function versus content words of one variant's best seed; its sentinel words where it has a gate."""

    label: str
    stats: dict[str, tuple[float, float]]  # "tau" / "sentinel" -> (function words, content words)
    sentinel_words: list[tuple[str, int]] | None = None


@dataclass
class FigureData:
    dev_curves: list[tuple[str, list[list[float]]]]  # row label -> each seed's dev BLEU by epoch
    test_set: str
    fixed_tau: list[tuple[float, float, float]] = field(default_factory=list)  # (tau, mean, std) of fixed rows
    best_sact: tuple[float, float] | None = None  # the best SACT row's BLEU (mean, std), drawn as a line
    heatmap: list[tuple[list[str], list[float]]] = field(default_factory=list)  # (tokens, tau) per dev sentence
    heatmap_of: TrialRecord | None = None
    words: list[WordRow] = field(default_factory=list)


def token_stats(table: pa.Table, frequent: int = FREQUENT_WORDS) -> dict[str, Any]:
    """Mean tau and gate of the most frequent output words (function words) against the rest."""
    tokens = table.column("token").to_pylist()
    top = {w for w, _ in Counter(tokens).most_common(frequent)}
    out: dict[str, Any] = {}
    for column in ("tau", "sentinel"):
        values = table.column(column).to_pylist()
        if values and values[0] is not None:
            function = [v for w, v in zip(tokens, values) if w in top]
            content = [v for w, v in zip(tokens, values) if w not in top]
            out[column] = (statistics.fmean(function) if function else float("nan"),
                           statistics.fmean(content) if content else float("nan"))
    return out


def sentinel_words(table: pa.Table, threshold: float = SENTINEL_THRESHOLD, top: int = 15) -> list[tuple[str, int]]:
    tokens, gates = table.column("token").to_pylist(), table.column("sentinel").to_pylist()
    return Counter(w for w, g in zip(tokens, gates) if g is not None and g >= threshold).most_common(top)


def fixed_tau_points(summary: Summary) -> list[tuple[float, float, float]]:
    """Each fixed-temperature row's BLEU at its tau; the baseline (no temperature) stands at tau = 1 exactly."""
    fixed = [r for r in summary.rows if r.records[0].params.get("attention.temperature") == "fixed"]
    if not fixed:
        return []
    points = {float(r.records[0].params["attention.tau"]): r.average for r in fixed}
    baseline = next((r for r in summary.rows if r.is_baseline), None)
    if baseline is not None and baseline.records[0].params.get("attention.temperature") == "none":
        points.setdefault(1.0, baseline.average)
    return [(tau, *average) for tau, average in points.items()]


def heatmap_sentences(trace: pa.Table) -> list[tuple[list[str], list[float]]]:
    sentences: dict[int, tuple[list[str], list[float]]] = {}
    for sent_id, token, tau in zip(*(trace.column(c).to_pylist() for c in ("sent_id", "token", "tau"))):
        if sent_id < HEATMAP_SENTENCES:
            sentences.setdefault(sent_id, ([], []))
            sentences[sent_id][0].append(token)
            sentences[sent_id][1].append(tau)
    return list(sentences.values())


def figure_data(summary: Summary, traces: dict[tuple[str, str], pa.Table]) -> FigureData:
    """What the figures draw; `traces` holds those records.wanted_traces names."""
    data = FigureData([(row.label, [r.curves.get("bleu_dev", []) for r in row.records]) for row in summary.rows],
                      summary.test_sets[0], fixed_tau_points(summary))
    sact = [r for r in summary.rows if is_adaptive(r.records[0].params.get("attention.temperature"))]
    if data.fixed_tau and sact:
        data.best_sact = max(sact, key=lambda r: r.average[0]).average
    if sact:
        data.heatmap_of = best_of([rec for r in sact for rec in r.records])
        data.heatmap = heatmap_sentences(traces[(data.heatmap_of.run_id, "dev")])
    for row in summary.rows:
        if has_gate_or_sact(row.records[0].params):  # else a constant temperature and no gate: nothing to compare
            table = traces[(best_of(row.records).run_id, data.test_set)]
            stats = token_stats(table)
            data.words.append(WordRow(row.label, stats, sentinel_words(table) if "sentinel" in stats else None))
    return data


def draw_figures(data: FigureData, out: Path) -> list[str]:
    """The figures into `out`, and the summary's sections that show them."""
    plots.dev_curves(data.dev_curves, out / "dev_bleu_curves.png")
    sections = ["## Dev BLEU by epoch (mean over seeds; convergence)\n\n![dev curves](dev_bleu_curves.png)\n"]
    if data.fixed_tau:
        plots.fixed_tau_curve(data.fixed_tau, data.best_sact,
                              [out / "fixed_tau_curve.png", out / "fixed_tau_curve.svg"])
        sections.append("## Fixed temperature vs SACT (SACT Figure 1)\n\nThe baseline (no temperature) stands at "
                        "tau = 1. Mean ± std over seeds.\n\n![fixed tau](fixed_tau_curve.png)\n")
    if data.heatmap:
        plots.temperature_heatmap(data.heatmap, out / "temperature_heatmap.png",
                                  float(data.heatmap_of.params["attention.lambda"]))
        sections.append(f"## Temperature heatmap (SACT Figure 2), best SACT trial `{data.heatmap_of.variant}`\n\n"
                        "![tau heatmap](temperature_heatmap.png)\n")
    return sections + word_sections(data)


def word_sections(data: FigureData) -> list[str]:
    """Sentinel words per gated variant, then function vs content words of every SACT or gated variant."""
    sections, lines = [], []
    for row in data.words:
        cells = [f"{row.stats[c][0]:.3f} / {row.stats[c][1]:.3f}" if c in row.stats else ""
                 for c in ("tau", "sentinel")]
        lines.append(f"| {row.label} | {cells[0]} | {cells[1]} |")
        if row.sentinel_words is not None:
            words = row.sentinel_words
            sections.append(f"## Words with sentinel gate >= {SENTINEL_THRESHOLD} (Li & Zhu Table 2), `{row.label}`\n\n"
                            + ("| word | count |\n|---|---|\n" + "\n".join(f"| {w} | {n} |" for w, n in words)
                               if words else "none on this test set") + "\n")
    if lines:
        sections.append(f"## Function vs content words ({data.test_set})\n\nMean over output tokens: the "
                        f"{FREQUENT_WORDS} most frequent output words (function words) / the rest (content words).\n\n"
                        "| variant | tau | sentinel gate |\n|---|---|---|\n" + "\n".join(lines) + "\n")
    return sections


def importance_sections(records: list[TrialRecord], metric: str, mode: str, out: Path) -> list[str]:
    """Parameter importance and parallel coordinates over every finished trial (seeds separately)."""
    points, varying = importance.trial_points([(f"{r.variant}-{r.trial_id}", r.params, objective_of(r, metric, mode))
                                               for r in records])
    result = importance.parameter_importance(points, varying, metric, mode)
    sections = ["## Parameter importance\n\n" + importance.render(result)]
    drawn = [p for p in points if p.objective is not None]
    if varying and drawn:
        plots.parallel_coordinates({k: [p.params[k] for p in drawn] for k in varying},
                                   [p.objective for p in drawn], f"best {metric}", out / "parallel_coordinates.png")
        missing = len(points) - len(drawn)
        without = f", {missing} without {metric}" if missing else ""
        sections.append(f"## Parallel coordinates ({len(drawn)} trials{without})"
                        "\n\n![parallel coordinates](parallel_coordinates.png)\n")
    return sections
