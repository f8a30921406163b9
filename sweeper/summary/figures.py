"""Figures and the word tables drawn from attention traces: their data first (from the summary and the snapshot's
traces, no tracking server), then the drawing. Dev BLEU curves, the fixed-tau curve (SACT Figure 1), the temperature
heatmap (Figure 2), sentinel words (Li & Zhu Table 2), tau and gate by word class (sweeper.summary.word_classes),
parameter importance and parallel coordinates.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

import sweeper.summary.importance as importance
import sweeper.summary.word_classes as word_classes
from nmt_core.family.registry import is_adaptive
from nmt_core.training.evaluate import HEAD_LABELS
from sweeper.summary.plots import (
    dev_curves,
    fixed_tau_curve,
    head_temperature_heatmap,
    parallel_coordinates,
    strip_plot,
    temperature_heatmap,
)
from sweeper.summary.records import TOP_ROWS, TrialRecord, best_of, has_gate_or_sact
from sweeper.summary.statistics import (
    LEARNED,
    Summary,
    VariantRow,
    beside_temperature,
    fixed_tau_of,
    objective_of,
    seed_interval,
    temperature_keys,
)
from sweeper.summary.tables import shown_rows
from sweeper.tracking.metrics import RUN_COLOUR, colour

SENTINEL_THRESHOLD = 0.9  # Li & Zhu Table 2
HEATMAP_SENTENCES = 4
TOP_CURVES = 10  # dev curves drawn of a sweep with more than TOP_ROWS rows: its best rows' (a legend one can read)
MIN_CURVE_POINTS = 3  # constant temperatures the fixed-tau curve needs (SACT Figure 1: tau 0.8 to 1.2)


@dataclass
class FigureData:
    dev_curves: list[tuple[str, list[list[float]]]]  # row label -> each seed's dev BLEU by epoch
    rows: int  # rows in the BLEU table (more than the curves drawn of a large sweep)
    test_set: str
    fixed_tau: list[SeedPoint] = field(default_factory=list)  # the fixed-tau curve's points, by tau
    bands: list[SeedPoint] = field(default_factory=list)  # SACT and learned-tau rows beside it, as bands
    fixed_tau_note: str = ""  # why there is no curve although the sweep has temperature rows
    heatmap: list[tuple[list[str], list[float]]] = field(default_factory=list)  # (tokens, tau) per dev sentence
    heatmap_of: TrialRecord | None = None
    heads: tuple[list[str], list[list[float]], list[str]] | None = (
        None  # a Transformer's (tokens, tau per head, labels)
    )
    sentinel: list[tuple[str, list[tuple[str, int]]]] = field(default_factory=list)  # gated row -> its words
    word_classes: word_classes.WordClasses | None = None  # tau and gate by word class, teacher-forced
    curve_colours: list[str] = field(default_factory=list)  # each dev curve's colour, as its runs' in MLflow
    strip: list[tuple[str, list[float]]] = field(default_factory=list)  # row label -> each seed's test BLEU (avg)
    strip_colours: list[str] = field(default_factory=list)  # each strip's colour, as its runs' in MLflow
    strip_label: str = "test BLEU"  # its axis: the one test set's name, or the average over several


def sentinel_words(table: pa.Table, threshold: float = SENTINEL_THRESHOLD, top: int = 15) -> list[tuple[str, int]]:
    tokens, gates = table.column("token").to_pylist(), table.column("sentinel").to_pylist()
    return Counter(w for w, g in zip(tokens, gates) if g is not None and g >= threshold).most_common(top)


@dataclass
class SeedPoint:
    """A row's test BLEU as the fixed-tau figure draws it: the mean over seeds and its 95% seed interval."""

    label: str
    tau: float | None  # a fixed-tau point's temperature; None for a band (SACT, learned)
    mean: float
    interval: tuple[float, float]
    seeds: int


def seed_point(row: VariantRow, tau: float | None = None, label: str = "") -> SeedPoint:
    return SeedPoint(label or row.label, tau, row.average[0], seed_interval(row), row.seeds)


def fixed_tau_figure(summary: Summary) -> tuple[list[SeedPoint], list[SeedPoint]]:
    """SACT Figure 1's points and bands: the constant temperatures (fixed rows; the baseline is tau = 1) of the
    settings that hold the most of them, and the SACT and learned-tau rows with those settings."""
    keys = temperature_keys()
    groups: dict[tuple, dict[float, VariantRow]] = {}
    for row in summary.rows:
        if (tau := fixed_tau_of(row)) is not None:
            groups.setdefault(beside_temperature(row, keys), {}).setdefault(tau, row)
    if not groups:
        return [], []
    beside, points = max(groups.items(), key=lambda group: len(group[1]))
    bands = []
    for row in summary.rows:
        temperature = row.records[0].config.attention.temperature
        kind = "learned tau" if temperature == LEARNED else "SACT" if is_adaptive(temperature) else None
        if kind and beside_temperature(row, keys) == beside:
            bands.append(seed_point(row, label=f"{kind}: {row.label}"))
    return [seed_point(row, tau) for tau, row in sorted(points.items())], bands


def heatmap_sentences(trace: pa.Table) -> list[tuple[list[str], list[float]]]:
    sentences: dict[int, tuple[list[str], list[float]]] = {}
    for sent_id, token, tau in zip(*(trace.column(c).to_pylist() for c in ("sent_id", "token", "tau"))):
        if sent_id < HEATMAP_SENTENCES:
            sentences.setdefault(sent_id, ([], []))
            sentences[sent_id][0].append(token)
            sentences[sent_id][1].append(tau)
    return list(sentences.values())


def head_taus(trace: pa.Table) -> tuple[list[str], list[list[float]], list[str]] | None:
    """A Transformer trace's tau per layer and head over dev sentence 0 (tokens, taus, head labels); None for an RNN's
    trace, which has no per-head column."""
    labels = (trace.schema.metadata or {}).get(HEAD_LABELS, b"").decode()
    if not labels or "tau_heads" not in trace.column_names:
        return None
    rows = [
        (token, heads)
        for sent_id, token, heads in zip(*(trace.column(c).to_pylist() for c in ("sent_id", "token", "tau_heads")))
        if sent_id == 0 and heads
    ]
    return ([t for t, _ in rows], [h for _, h in rows], labels.split(",")) if rows else None


def row_colours(rows: list[VariantRow]) -> list[str]:
    """The rows' colours as MLflow draws their trials: each row's run colour (its variant's, from the one palette,
    sweeper.tracking.metrics.PALETTE); the palette in row order instead where a row has none (a sweep recorded before
    run colours) or two rows share one (rows a variant label does not tell apart), so that every row has its own."""
    tagged = [row.records[0].tags.get(RUN_COLOUR) for row in rows]
    if all(tagged) and len(set(tagged)) == len(tagged):
        return tagged
    return [colour(i) for i in range(len(rows))]


def figure_data(summary: Summary, traces: dict[tuple[str, str], pa.Table]) -> FigureData:
    """What the figures draw; `traces` holds those records.wanted_traces names."""
    ranked = sorted(summary.rows, key=lambda row: -row.average[0])
    drawn = summary.rows if len(summary.rows) <= TOP_ROWS else ranked[:TOP_CURVES]
    data = FigureData(
        [(row.label, [r.curves.get("bleu_dev", []) for r in row.records]) for row in drawn],
        len(summary.rows),
        summary.test_sets[0],
        curve_colours=row_colours(drawn),
    )
    shown = shown_rows(summary)  # the rows the BLEU table shows, in its order
    data.strip = [(row.label, [r.metrics["bleu_test_avg"] for r in row.records]) for row in shown]
    data.strip_colours = row_colours(shown)
    sets = summary.test_sets
    data.strip_label = f"test BLEU ({sets[0]})" if len(sets) == 1 else "test BLEU (avg over the test sets)"
    points, data.bands = fixed_tau_figure(summary)
    temperatures = data.bands or any(p.tau != 1.0 for p in points)
    if len(points) >= MIN_CURVE_POINTS:
        data.fixed_tau = points
    elif temperatures:
        taus = ", ".join(f"{p.tau:g}" for p in points) or "none"
        data.fixed_tau_note = (
            f"No curve: this sweep has {len(points)} constant temperature{'s' if len(points) != 1 else ''} "
            f"(tau {taus}; the baseline counts as tau = 1) with the same other settings, and a curve needs "
            f"{MIN_CURVE_POINTS} or more (the paper's tau 0.8-1.2: search_spaces/fixed_tau_ablation.yaml)."
        )
    sact = [r for r in summary.rows if is_adaptive(r.records[0].config.attention.temperature)]
    if sact:
        data.heatmap_of = best_of([rec for r in sact for rec in r.records])
        data.heatmap = heatmap_sentences(traces[(data.heatmap_of.run_id, "dev")])
        data.heads = head_taus(traces[(data.heatmap_of.run_id, "dev")])
    read = summary.rows if len(summary.rows) <= TOP_ROWS else ranked  # of a large sweep, the best rows' traces
    varying = [row for row in read if has_gate_or_sact(row.records[0])]  # else nothing varies by word
    for row in varying:
        trace = (best_of(row.records).run_id, data.test_set)
        if row.records[0].config.attention.sentinel and trace in traces:
            data.sentinel.append((row.label, sentinel_words(traces[trace])))
    data.word_classes = word_classes.word_classes([(r.label, r.records) for r in varying], traces, data.test_set)
    return data


STRIP = "bleu_by_variant.png"  # the first figure of the parent's description (report.figure_links)


def draw_figures(data: FigureData, out: Path) -> list[str]:
    """The figures into `out`, and the summary's sections that show them."""
    sections = strip_section(data, out)
    dev_curves(data.dev_curves, out / "dev_bleu_curves.png", data.curve_colours)
    which = "" if len(data.dev_curves) == data.rows else f"; the {len(data.dev_curves)} best of {data.rows} rows"
    sections += [
        f"## Dev BLEU by epoch (convergence{which})\n\nBold: the mean over seeds, as far as every seed ran; dashed: "
        "past it, the mean over the seeds still training; thin: each seed to its own last epoch (x: a seed that "
        "ended before the variant's longest).\n\n"
        "![dev curves](dev_bleu_curves.png)\n"
    ]
    if data.fixed_tau:
        fixed_tau_curve(
            [(p.tau, p.mean, *p.interval) for p in data.fixed_tau],
            [(p.label, p.mean, *p.interval) for p in data.bands],
            [out / "fixed_tau_curve.png", out / "fixed_tau_curve.svg"],
        )
        sections.append(
            "## Fixed temperature vs SACT (SACT Figure 1)\n\nTest BLEU (avg) at each fixed temperature, the mean over "
            "seeds with its 95% seed interval (mean ± t * std / sqrt(seeds); none for one seed); the baseline (no "
            "temperature) stands at tau = 1. SACT and the learned temperature with the same other settings: "
            "horizontal bands (mean, seed interval).\n\n![fixed tau](fixed_tau_curve.png)\n"
        )
    elif data.fixed_tau_note:
        sections.append(f"## Fixed temperature vs SACT (SACT Figure 1)\n\n{data.fixed_tau_note}\n")
    if data.heatmap:
        temperature_heatmap(data.heatmap, out / "temperature_heatmap.png", data.heatmap_of.config.attention.lambda_)
        sections.append(
            f"## Temperature heatmap (SACT Figure 2), best SACT trial `{data.heatmap_of.variant}`\n\n"
            "![tau heatmap](temperature_heatmap.png)\n"
        )
    if data.heads:
        head_temperature_heatmap(*data.heads, out / "temperature_heads.png", data.heatmap_of.config.attention.lambda_)
        sections.append(
            f"## Temperature per layer and head, best SACT trial `{data.heatmap_of.variant}` "
            "(dev sentence 0)\n\n![tau per head](temperature_heads.png)\n"
        )
    return sections + word_sections(data)


def strip_section(data: FigureData, out: Path) -> list[str]:
    """Test BLEU by variant, a dot per seed: the spread of each row at a glance (none without rows)."""
    if not data.strip:
        return []
    strip_plot(data.strip, data.strip_colours, out / STRIP, data.strip_label)
    return [
        "## Test BLEU by variant, a dot per seed\n\nEach seed's test BLEU (the average over the test sets), in its "
        "runs' colour in MLflow; the black bar is the row's mean, the number the tables give.\n\n"
        f"![BLEU by variant]({STRIP})\n"
    ]


def word_sections(data: FigureData) -> list[str]:
    """Sentinel words per gated variant (its best seed's output), then tau and gate by word class."""
    sections = [
        f"## Words with sentinel gate >= {SENTINEL_THRESHOLD} (Li & Zhu Table 2), `{label}`\n\n"
        + (
            "| word | count |\n|---|---|\n" + "\n".join(f"| {w} | {n} |" for w, n in words)
            if words
            else "none on this test set"
        )
        + "\n"
        for label, words in data.sentinel
    ]
    if data.word_classes is not None:
        sections.append(word_classes.render(data.word_classes))
    return sections


def importance_sections(records: list[TrialRecord], metric: str, mode: str, out: Path) -> list[str]:
    """Parameter importance and parallel coordinates over every finished trial (seeds separately). A setting
    chosen per row on dev (`--choose`) is left out: it moves with its row, so its importance would be the row's."""
    points, varying = importance.trial_points(
        [
            (
                f"{r.variant}-{r.trial_id}",
                {k: v for k, v in r.active.items() if k not in r.tuned},
                objective_of(r, metric, mode),
            )
            for r in records
        ]
    )
    result = importance.parameter_importance(points, varying, metric, mode)
    sections = ["## Parameter importance\n\n" + importance.render(result)]
    drawn = [p for p in points if p.objective is not None]
    if varying and drawn:
        parallel_coordinates(
            {k: [p.params[k] for p in drawn] for k in varying},
            [p.objective for p in drawn],
            f"best {metric}",
            out / "parallel_coordinates.png",
        )
        missing = len(points) - len(drawn)
        without = f", {missing} without {metric}" if missing else ""
        sections.append(
            f"## Parallel coordinates ({len(drawn)} trials{without})"
            "\n\n![parallel coordinates](parallel_coordinates.png)\n"
        )
    return sections
