"""The verdict a researcher reads first (issue 71): a line per comparison, a compact table of the variants and the
warnings cut to a line each. The same lines head summary.md, the parent run's description in MLflow (which shows
its first ~100 pixels folded, so they come before anything else there) and the console's end.

A designed sweep's lines are its design's (sweeper.summary.sequential.design_lines: its primary comparisons at their
looks); any other sweep's are each row's test against its baseline: both rows' mean ± std over seeds, the
difference with its 95% interval and the verdict in words. The table is plain text in columns (a fenced code block
in markdown): MLflow renders a description's markdown table without borders or padding, so its cells run together
(`10.59 ± 0.7110.59 ± 0.71`), while a code block keeps them apart in any viewer.
"""

from __future__ import annotations

from sweeper.summary.sequential import design_lines
from sweeper.summary.statistics import BETTER, FIXED, LEARNED, WORSE, Comparison, Summary, VariantRow
from sweeper.summary.tables import interval, mean_std, shown_rows

WARNING_CHARS = 110  # a warning's one line: its first sentence, cut at a word past this
MAX_WARNINGS = 5  # warnings the headline names, a line each; the rest counted in one more
MIN_CLAUSE = 30  # characters a warning's first clause has at least: `` `general+none`: `` alone says nothing
FENCE = "```"


def verdict_lines(summary: Summary) -> list[str]:
    """A markdown list item per comparison: the design's primary comparisons (or the one line saying its design
    changed), else the table's tests (each row against its baseline, each SACT row against its controls) of the
    rows it shows; one line saying so where there is nothing to test against."""
    if summary.design_changed or summary.design:
        return design_lines(summary.design, summary.design_changed)
    shown = {id(row) for row in shown_rows(summary)}
    lines = [comparison_line(c) for c in summary.comparisons if id(c.row) in shown]
    if lines:
        return lines
    best = max(summary.rows, key=lambda row: row.average[0])
    return [f"- **{best.label}** has the highest test BLEU, {numbers(best)}; nothing in this sweep to test it against"]


def plain_lines(lines: list[str]) -> list[str]:
    """The verdict's lines without markdown's marks (the list's dash, bold): for a receiver that shows text."""
    return [line.removeprefix("- ").replace("**", "") for line in lines]


def numbers(row: VariantRow) -> str:
    """`10.59 ± 0.71 (n 2)`: a row's mean test BLEU over its seeds, their std and how many."""
    return f"{mean_std(row, row.average)} (n {row.seeds})"


def verdict_words(c: Comparison) -> str:
    """The verdict in words: better or worse with its Holm-corrected p, else what the seeds could have detected;
    a test on test-set variance only (one seed a row) makes no claim, and says so."""
    if c.test is None:
        return f"no verdict over seeds (test-set variance only, p {c.p_adjusted:.2g})"
    if c.mark in BETTER or c.mark in WORSE:
        return f"{'better' if c.mark in BETTER else 'worse'} (p {c.p_adjusted:.2g}, Holm)"
    words = "no significant difference"
    if c.detectable is not None:
        words += f" (detectable ≥ {c.detectable:.2f})"
    if c.equivalence_p is not None and c.alpha is not None and c.equivalence_p < c.alpha:
        words += f", equivalent within ±{c.margin:g}"
    return words


def comparison_line(c: Comparison) -> str:
    """`- **SACT λ4** vs no temperature: no significant difference (detectable ≥ 2.10), -1.53 [-3.89, +0.83] test
    BLEU; 9.06 ± 1.32 (n 2) vs 10.59 ± 0.71 (n 2)`."""
    role = {LEARNED: "its learned control", FIXED: "its fixed control"}.get(c.control, "")
    against = f"{c.against.label} ({role})" if role else c.against.label
    return (
        f"- **{c.row.label}** vs {against}: **{verdict_words(c)}**, {c.delta:+.2f} {interval(c.interval)} "
        f"test BLEU; {numbers(c.row)} vs {numbers(c.against)}"
    )


def table_lines(summary: Summary) -> list[str]:
    """The variants in aligned columns: mean ± std of test BLEU (avg over the test sets), the seeds' min-max, the
    seeds, the difference to the row's baseline with its mark and 95% interval."""
    header = ["variant", f"test BLEU {test_name(summary)}", "min-max", "seeds", "Δ vs baseline"]
    rows = [header] + [cells(row) for row in shown_rows(summary)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def test_name(summary: Summary) -> str:
    """`avg` over several test sets; the one set's name where there is one (its avg is the same number)."""
    return f"({summary.test_sets[0]})" if len(summary.test_sets) == 1 else "avg"


def cells(row: VariantRow) -> list[str]:
    scores = [r.metrics["bleu_test_avg"] for r in row.records]
    tested = row.against_baseline
    if row.is_baseline:
        delta = "baseline"
    else:
        delta = "" if tested is None else f"{tested.delta:+.2f}{tested.mark} {interval(tested.interval)}"
    return [row.label, mean_std(row, row.average), f"{min(scores):.2f}-{max(scores):.2f}", str(row.seeds), delta]


def first_clause(text: str) -> str:
    """`text` up to the end of its first clause (`.`, `;` or `:` before a space, outside brackets) that is at least
    MIN_CLAUSE long: one that says more than the row it names."""
    depth = 0
    for at, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and char in ".;:" and text[at + 1 : at + 2] == " " and at >= MIN_CLAUSE:
            return text[:at]
    return text.rstrip(".")


def short_warning(warning: str) -> str:
    """A warning's first clause on one line (`` `SACT λ4`: tau at its upper bound for 97% of dev tokens (p5 3.96,
    p95 4.00)``), cut at a word past WARNING_CHARS."""
    first = first_clause(warning.strip())
    if len(first) > WARNING_CHARS:
        first = first[: first.rfind(" ", 0, WARNING_CHARS)].rstrip(",;:") + " …"
    return f"- Warning: {first}"


def headline(summary: Summary, where: str, fenced: bool = True) -> list[str]:
    """The verdict lines, the variants' table (`fenced`: as a markdown code block) and the warnings, a line each,
    then `where` their full text is."""
    table = table_lines(summary)
    if fenced:
        table = [FENCE, *table, FENCE]
    warnings = [short_warning(warning) for warning in summary.warnings[:MAX_WARNINGS]]
    more = len(summary.warnings) - len(warnings)
    if warnings:
        warnings += ["", f"Warnings in full{f' ({more} more)' if more else ''}: {where}"]
    return [*verdict_lines(summary), "", *table, *([""] if warnings else []), *warnings]
