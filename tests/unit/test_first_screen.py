"""Issue 71: the answer first. The verdict lines, the variants' table and the short warnings that head summary.md,
the parent run's description and the console's end; the strip figure (a dot per seed); the translations page.
What a browser makes of them: tests/e2e/test_mlflow_view.py."""

from __future__ import annotations

import re

import pytest
from sacrebleu.metrics import CHRF

from sweeper.summary.figures import STRIP, draw_figures, figure_data
from sweeper.summary.headline import headline, short_warning, table_lines, verdict_lines
from sweeper.summary.report import compute, figure_links, significance_of, write_report
from sweeper.summary.translations_page import Column, marked, order, render, sources_of
from tests.unit.test_summary import _review_snapshot


def three_rows():
    """3 seeds a row: the baseline loses words in every 2nd sentence, `tau4` outputs the references (better), and
    `tau0.5` the baseline's own outputs (no difference)."""
    rows = [
        ("general+none", {}, 0.001, 2, {}),
        ("general+tau4", {"temperature": "fixed", "tau": 4.0}, 0.001, 0, {}),
        ("general+tau0.5", {"temperature": "fixed", "tau": 0.5}, 0.001, 2, {}),
    ]
    return _review_snapshot(rows, 3, {"resamples": 200}, seeds_differ=True)


@pytest.fixture(scope="module")
def summary():
    snapshot = three_rows()
    return compute(snapshot, significance_of(snapshot, None))


def test_a_line_per_variant_against_its_baseline_with_its_numbers_and_the_verdict_in_words(summary):
    lines = {line.split("**")[1]: line for line in verdict_lines(summary)}
    assert set(lines) == {"general+tau4", "general+tau0.5"}  # the baseline is what they are compared with
    better, same = lines["general+tau4"], lines["general+tau0.5"]
    row = next(r for r in summary.rows if r.label == "general+tau4")
    c = row.against_baseline
    assert better.startswith(f"- **general+tau4** vs general+none: **better (p {c.p_adjusted:.2g}, Holm)**, ")
    assert f"{c.delta:+.2f} [{c.interval[0]:+.2f}, {c.interval[1]:+.2f}] test BLEU" in better
    mean, std = row.average
    assert f"; {mean:.2f} ± {std:.2f} (n 3) vs " in better  # the row's mean ± std over its seeds, and how many
    detectable = next(r for r in summary.rows if r.label == "general+tau0.5").against_baseline.detectable
    assert f"**no significant difference (detectable ≥ {detectable:.2f})**" in same


def test_the_variants_table_keeps_its_columns_apart_without_borders(summary):
    header, *rows = table_lines(summary)
    assert header.split("  ")[0] == "variant" and "test BLEU (test)" in header and "Δ vs baseline" in header
    starts = [match.start() for match in re.finditer(r"(?<=  )\S", header)]  # where each column after the first is
    for line, row in zip(rows, summary.rows):
        scores = [r.metrics["bleu_test_avg"] for r in row.records]
        assert all(line[at - 2 : at] == "  " and line[at] != " " for at in starts[:-1])  # every cell at its column
        assert f"{min(scores):.2f}-{max(scores):.2f}" in line and f"  {row.seeds}  " in line
    assert rows[0].rstrip().endswith("baseline")


def test_a_warning_is_cut_to_a_line_that_says_more_than_its_rows_name():
    warning = (
        "`general+sact4`: tau at its upper bound for 97% of dev tokens (p5 3.96, p95 4.00): SACT acts as a fixed "
        "temperature 4 here, not an adaptive one."
    )
    first = "`general+sact4`: tau at its upper bound for 97% of dev tokens (p5 3.96, p95 4.00)"
    assert short_warning(warning) == f"- Warning: {first}"
    long = "fewer than 3 seeds in 6 of 6 rows (" + ", ".join(f"`row{i}` (1)" for i in range(30)) + "): a row ..."
    cut = short_warning(long)
    assert len(cut) < 130 and cut.endswith(" …")


def test_the_verdict_heads_summary_md_before_the_full_table(summary, tmp_path):
    written = write_report(three_rows(), tmp_path, ["md"])
    text = (tmp_path / "summary.md").read_text(encoding="utf-8")
    verdict = "\n".join(headline(written, "below, with the BLEU table"))
    assert text.index("## Verdict") < text.index(verdict) < text.index("## BLEU") < text.index("| variant | seeds |")
    assert text.index("# Sweep `review`") < text.index("## Verdict")


def test_the_strip_figure_draws_each_seed_and_comes_first(summary, tmp_path):
    """Test BLEU by variant, a dot per seed, in the rows' colours: the spread the mean hides."""
    data = figure_data(summary, {})
    assert data.strip == [(row.label, [r.metrics["bleu_test_avg"] for r in row.records]) for row in summary.rows]
    assert len(data.strip_colours) == len(summary.rows) and data.strip_label == "test BLEU (test)"
    sections = draw_figures(data, tmp_path)
    assert sections[0].startswith("## Test BLEU by variant, a dot per seed") and f"]({STRIP})" in sections[0]
    assert (tmp_path / STRIP).stat().st_size > 2000
    (tmp_path / "aaa.png").write_bytes(b"")  # a name that sorts first: the strip still leads the description
    assert figure_links("r1", tmp_path).splitlines()[0].startswith("![bleu_by_variant](get-artifact?path=summary%2F")


def test_the_translations_page_marks_what_differs_and_scores_each_hypothesis():
    refs = ["a b c d", "x y z", "same words here"]
    good = Column("SACT λ4", 2, "#445461", {"test": ["a b c d", "x q z", "same words here"]})
    poor = Column("no temperature", 1, "#e65b77", {"test": ["a b", "x y z", "same words here"]})
    page = render("demo", {"test": (["s1", "s2", "s3"], refs)}, [poor, good])
    chrf = CHRF()
    for column in (good, poor):
        for hyp, ref in zip(column.hypotheses["test"], refs):
            assert f'<span class="chrf">{chrf.sentence_score(hyp, [ref]).score:.0f}</span>' in page
    assert marked("x q z", "x y z") == "x <mark>q</mark> z" and marked("a b", "a b c d") == "a b"
    assert "SACT λ4 <small>(seed 2)</small>" in page and "background:#445461" in page
    rows = re.findall(r'<td class="n">(\d+)</td>', page)
    assert rows[-1] == "3"  # the sentence every variant translated alike comes last
    assert order([[100.0, 50.0, 70.0], [100.0, 100.0, 70.0]]) == [1, 0, 2]
    assert sources_of(["source\treference\thypothesis", "s1\tr1\th1", "s2\tr2\th2"]) == ["s1", "s2"]
    assert "all 3 sentences" in page and "<code>test</code>" in page
