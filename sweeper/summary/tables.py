"""Pure renderers: the BLEU table as markdown, CSV and LaTeX, the alignment table, PBT schedules. They format what
statistics computed and read nothing else.
"""

from __future__ import annotations

import csv
import io

from sweeper.metrics import EXPLOITS, SETTING_PREFIX
from sweeper.summary.records import TOP_ROWS, TrialRecord
from sweeper.summary.statistics import BETTER, CONTROL, WORSE, AlignmentTable, Summary, VariantRow, baselines_of


def _cells(row: VariantRow, test_sets: list[str], plus_minus: str) -> list[str]:
    def fmt(mean_and_std: tuple[float, float] | None) -> str:
        if mean_and_std is None:
            return ""
        mean, std = mean_and_std
        return f"{mean:.2f}" if row.seeds == 1 else f"{mean:.2f} {plus_minus} {std:.2f}"

    delta = "baseline" if row.is_baseline else "" if row.delta is None else f"{row.delta:+.2f}{row.mark}"
    time = "" if row.epoch_time_s is None else f"{row.epoch_time_s:.1f}"
    p = "" if row.p_adjusted is None else f"{row.p_adjusted:.3g}"  # 0.0499 stays below 0.05
    return [
        row.label,
        str(row.seeds),
        *(fmt(row.tests[s]) for s in test_sets),
        fmt(row.average),
        fmt(row.paper_average),
        f"{row.n_params / 1e6:.2f}M",
        time,
        delta,
        interval(row.interval),
        p,
    ]


def interval(bounds: tuple[float, float] | None) -> str:
    return "" if bounds is None else f"[{bounds[0]:+.2f}, {bounds[1]:+.2f}]"


def shown_rows(summary: Summary) -> list[VariantRow]:
    """Every row of a table of up to TOP_ROWS rows, in the table's order. Of a longer one (a 1,000-trial random
    sweep has a row per trial), the TOP_ROWS best by average BLEU and the baselines they are compared with, best
    first: a table one can read, with every delta's reference in it."""
    if len(summary.rows) <= TOP_ROWS:
        return summary.rows
    best = sorted(summary.rows, key=lambda row: -row.average[0])[:TOP_ROWS]
    shown = {id(row) for row in best} | {
        id(base) for base in baselines_of(summary.rows, summary.criteria, best).values()
    }
    return [row for row in sorted(summary.rows, key=lambda row: -row.average[0]) if id(row) in shown]


def left_out_note(summary: Summary, shown: list[VariantRow]) -> list[str]:
    """What a truncated table says about the rows it leaves out."""
    if len(shown) == len(summary.rows):
        return []
    return [
        (
            f"Rows: the {TOP_ROWS} best of {len(summary.rows)} by average BLEU, best first, with the baselines they "
            f"are compared with; {len(summary.rows) - len(shown)} rows left out (every row: `sweeper summarize "
            "--format csv`, bleu_table.csv)."
        )
    ]


def table_header(test_sets: list[str]) -> list[str]:
    return [
        "variant",
        "seeds",
        *test_sets,
        "avg",
        "multi-bleu avg",
        "#params",
        "s/epoch",
        "delta avg",
        "95% CI",
        "p (Holm)",
    ]


def render_controls(summary: Summary) -> list[str]:
    """SACT against its fixed tau = lambda control, tested and corrected with the table (no lines without one)."""
    controls = [c for c in summary.comparisons if c.kind == CONTROL]
    if not controls:
        return []
    lines = [
        "",
        "SACT against its fixed-temperature control (tau = lambda, every other setting the same): is a gain "
        "adaptivity or a rescaling of the logits?",
        "",
        "| SACT | control | delta avg | 95% CI | p | p (Holm) |",
        "|---|---|---|---|---|---|",
    ]
    return lines + [
        f"| {c.row.label} | {c.against.label} | {c.delta:+.2f}{c.mark} | {interval(c.interval)} | "
        f"{c.p_value:.3g} | {c.p_adjusted:.3g} |"
        for c in controls
    ]


def render_markdown(summary: Summary) -> str:
    lines = []
    if summary.warnings:
        lines += ["**Warnings: read these before the table.**", ""]
        lines += [f"- **{warning}**" for warning in summary.warnings] + [""]
    header = table_header(summary.test_sets)
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = shown_rows(summary)
    lines += ["| " + " | ".join(_cells(row, summary.test_sets, "±")) + " |" for row in shown]
    lines += render_controls(summary)
    lines.append("")
    lines += left_out_note(summary, shown)
    lines.append(
        "BLEU: sacrebleu on the detokenised output against the raw reference text, mean ± sample std over "
        "seeds" + (f" (`{summary.signatures['BLEU']}`)" if "BLEU" in summary.signatures else "") + ". "
        "multi-bleu: lowercased BLEU of word tokens, as multi-bleu.perl computes the papers' numbers"
        + (f" (`{summary.signatures['multi-bleu']}`)" if "multi-bleu" in summary.signatures else "")
        + "."
    )
    if summary.method:
        lines.append(f"delta avg: {summary.method}.")
    lines += [f"Note: {note}" for note in summary.notes]
    return "\n".join(lines) + "\n"


def render_csv(summary: Summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(
        [
            "variant",
            "seeds",
            *[f"{s}_{x}" for s in summary.test_sets for x in ("mean", "std")],
            "avg_mean",
            "avg_std",
            "multibleu_avg_mean",
            "multibleu_avg_std",
            "n_params",
            "epoch_time_s",
            "delta_avg",
            "mark",
            "p_value",
            "p_holm",
            "ci_low",
            "ci_high",
        ]
    )
    for row in summary.rows:
        paper = row.paper_average or ("", "")
        writer.writerow(
            [
                row.label,
                row.seeds,
                *[f"{v:.4f}" for s in summary.test_sets for v in row.tests[s]],
                f"{row.average[0]:.4f}",
                f"{row.average[1]:.4f}",
                *(f"{v:.4f}" if v != "" else v for v in paper),
                row.n_params,
                "" if row.epoch_time_s is None else f"{row.epoch_time_s:.3f}",
                "" if row.delta is None else f"{row.delta:.4f}",
                row.mark,
                "" if row.p_value is None else row.p_value,
                "" if row.p_adjusted is None else row.p_adjusted,
                *(("", "") if row.interval is None else (f"{v:.4f}" for v in row.interval)),
            ]
        )
    return out.getvalue()


def render_latex(summary: Summary) -> str:
    header = table_header(summary.test_sets)
    escape = str.maketrans({"_": r"\_", "+": r"{+}", "#": r"\#", "%": r"\%", "†": r"$^\dagger$"})
    lines = [
        r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}",
        r"\toprule",
        " & ".join(h.translate(escape) for h in header) + r" \\",
        r"\midrule",
    ]
    shown = shown_rows(summary)
    for row in shown:
        cells = [c.translate(escape).replace("±", r"$\pm$") for c in _cells(row, summary.test_sets, "±")]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", *(f"% {note}" for note in left_out_note(summary, shown))]
    return "\n".join(lines) + "\n"


def render_alignment(summary: Summary, table: AlignmentTable) -> str:
    """AER and gold-attention mass per variant beside its BLEU, mean +- std over seeds, with each delta's test."""
    header = [
        "variant",
        "seeds",
        "BLEU avg",
        "AER",
        "delta AER",
        "p (Holm)",
        "gold attention",
        "delta gold",
        "p (Holm)",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    shown = shown_rows(summary)
    for row in shown:
        bleu = f"{row.average[0]:.2f}" if row.seeds == 1 else f"{row.average[0]:.2f} ± {row.average[1]:.2f}"
        cells = []
        for cell in table.cells[id(row)]:
            cells.append(f"{cell.mean:.3f}" if row.seeds == 1 else f"{cell.mean:.3f} ± {cell.std:.3f}")
            if cell.delta is not None:
                cells += [f"{cell.delta:+.3f}{cell.mark}", f"{cell.p_adjusted:.3g}"]
            else:
                cells += ["baseline" if row.is_baseline else "", ""]
        lines.append("| " + " | ".join([row.label, str(row.seeds), bleu, *cells]) + " |")
    lines += [
        "",
        f"Attention against the gold word alignments of {', '.join(table.sets)} ({sum(table.sizes.values())} "
        "sentences), with the reference forced through the decoder. AER: alignment error rate of each target "
        "word's most attended source word (Och & Ney 2003, gold links as sure and possible; lower is better). "
        "Gold attention: the mean attention weight on a target word's gold-linked source words (higher is "
        f"better). Deltas and p as for BLEU ({table.resamples} resamples over sentences, seeds averaged, "
        f"Holm-corrected per column): {BETTER[0]} / {BETTER[1]} better, {WORSE[0]} / {WORSE[1]} worse at "
        "p < 0.01 / 0.05.",
        *left_out_note(summary, shown),
    ]
    return "\n".join(lines) + "\n"


def pbt_schedule(record: TrialRecord) -> str | None:
    """A PBT trial's settings epoch by epoch, and where it copied another trial's weights; None for other trials."""
    keys = sorted(record.settings)
    if not keys:
        return None
    events = {int(e["epoch"]) + 1: e for e in record.pbt_events}
    histories = [record.settings[key] for key in keys]
    spans: list[list] = []  # [first epoch, last epoch, settings]
    for epoch in sorted(histories[0]):
        values = tuple(h.get(epoch) for h in histories)
        if spans and spans[-1][2] == values and epoch not in events:
            spans[-1][1] = epoch
        else:
            spans.append([epoch, epoch, values])
    cells = []
    for first, last, values in spans:
        setting = ", ".join(f"{k.removeprefix(SETTING_PREFIX)}={v:.3g}" for k, v in zip(keys, values))
        event = events.get(first)
        copied = f" (weights of trial {event['copied_from']} at epoch {event['epoch']})" if event else ""
        cells.append(f"epochs {first}-{last}: {setting}{copied}")
    return f"| {record.variant}-{record.trial_id} | {record.tags.get(EXPLOITS, '0')} | " + "<br>".join(cells) + " |"


def render_pbt_schedules(records: list[TrialRecord]) -> list[str]:
    """Each PBT trial's schedule as a section; none for a sweep without PBT."""
    rows = [row for row in map(pbt_schedule, sorted(records, key=lambda r: r.trial_id)) if row]
    if not rows:
        return []
    return [
        "## PBT schedules\n\nThe settings each trial trained with, epoch by epoch; an exploit copies a better "
        "trial's weights and perturbs its settings.\n\n| trial | exploits | schedule |\n|---|---|---|\n"
        + "\n".join(rows)
        + "\n"
    ]
