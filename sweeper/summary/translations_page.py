"""The variants' translations side by side as one HTML page on the parent run (issue 71): MLflow's artifact view
previews a `.html` file inline, where its evaluation view fits two trials at 1280 pixels, three sentences a screen,
with no score per sentence and no reference unless picked.

Per test sentence: the source, the reference and each variant's hypothesis (its best seed's, by test BLEU, as the
summary's figures pick it), the words that differ from the reference marked, with the sentence's chrF (sacrebleu's
sentence_score). Sentences where the variants' chrF differ most come first: where they disagree is what a reader
looks for; each keeps its number in the test set. Rows are compact and the columns take the variants' run colours.
"""

from __future__ import annotations

import difflib
import html
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlflow.tracking import MlflowClient
from sacrebleu.metrics import CHRF

from sweeper.summary.figures import row_colours
from sweeper.summary.records import SummaryError, SweepSnapshot, artifact_lines, best_of
from sweeper.summary.statistics import Summary, VariantRow

MAX_VARIANTS = 8  # columns: the table's first rows (baselines first)
MAX_SENTENCES = 300  # rows a set shows: those where the variants differ most
PAGE = "translations.html"  # beside summary.md in the parent's artifacts

STYLE = """
body { font: 13px/1.35 system-ui, sans-serif; margin: 8px; color: #1f272d; }
h1 { font-size: 16px; margin: 4px 0; } h2 { font-size: 14px; margin: 14px 0 4px; } p { margin: 4px 0; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { border: 1px solid #d0d7de; padding: 2px 6px; vertical-align: top; text-align: left; }
th { background: #f6f8fa; position: sticky; top: 0; }
.n { width: 34px; color: #5f7281; } td.src { background: #fbfbfb; }
mark { background: #ffe08a; padding: 0 1px; } .chrf { float: right; color: #5f7281; font-size: 11px; }
.best .chrf { color: #137dae; font-weight: bold; } .swatch { display: inline-block; width: 10px; height: 10px; }
"""


@dataclass
class Column:
    """A variant's column: its label, the seed whose hypotheses it shows, its colour, hypotheses by test set."""

    label: str
    seed: int
    colour: str
    hypotheses: dict[str, list[str]]


def columns(summary: Summary, translations: dict[str, dict[str, list[str]]], colours: list[str]) -> list[Column]:
    """The first MAX_VARIANTS rows of the table, each by its best seed; `colours` in row order (row_colours)."""
    rows: list[VariantRow] = summary.rows[:MAX_VARIANTS]
    picked = [best_of(row.records) for row in rows]
    return [
        Column(row.label, record.config.train.seed, colour, translations[record.run_id])
        for row, record, colour in zip(rows, picked, colours)
    ]


def marked(hypothesis: str, reference: str) -> str:
    """The hypothesis as HTML, each run of words that the reference does not have in that place marked."""
    ref, hyp = reference.split(), hypothesis.split()
    words = []
    for tag, _, _, low, high in difflib.SequenceMatcher(None, ref, hyp, autojunk=False).get_opcodes():
        text = html.escape(" ".join(hyp[low:high]))
        if text:
            words.append(text if tag == "equal" else f"<mark>{text}</mark>")
    return " ".join(words)


def order(scores: list[list[float]], limit: int = MAX_SENTENCES) -> list[int]:
    """Sentence indices, those whose chrF differs most between the variants first (ties: in test-set order)."""
    spread = [max(per) - min(per) if per else 0.0 for per in zip(*scores)] if scores else []
    return sorted(range(len(spread)), key=lambda i: (-spread[i], i))[:limit]


def set_section(name: str, sources: list[str], references: list[str], shown: list[Column]) -> str:
    """One test set's table: a row per sentence, a column per variant."""
    chrf = CHRF()
    scores = [
        [chrf.sentence_score(hyp, [ref]).score for hyp, ref in zip(column.hypotheses[name], references)]
        for column in shown
    ]
    head = "".join(
        f'<th><span class="swatch" style="background:{c.colour}"></span> {html.escape(c.label)} '
        f"<small>(seed {c.seed})</small></th>"
        for c in shown
    )
    picked = order(scores)
    body = "".join(
        sentence_row(i, sources, references[i], [(c.hypotheses[name][i], s[i]) for c, s in zip(shown, scores)])
        for i in picked
    )
    if len(picked) < len(references):
        which = f"the {len(picked)} of {len(references)} sentences where the variants differ most"
    else:
        which = f"all {len(references)} sentences, those where the variants differ most first"
    return (
        f"<h2>Test set <code>{html.escape(name)}</code>: {which}</h2>"
        f'<table><thead><tr><th class="n">#</th><th>source</th><th>reference</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )


def sentence_row(i: int, sources: list[str], reference: str, hypotheses: list[tuple[str, float]]) -> str:
    """Sentence `i`: its number, source, reference and each variant's (hypothesis, chrF), the best chrF in bold."""
    best = max(score for _, score in hypotheses)
    cells = "".join(
        f'<td class="{"best" if score == best else ""}"><span class="chrf">{score:.0f}</span>'
        f"{marked(hypothesis, reference)}</td>"
        for hypothesis, score in hypotheses
    )
    source = html.escape(sources[i]) if i < len(sources) else ""
    return f'<tr><td class="n">{i + 1}</td><td class="src">{source}</td><td>{html.escape(reference)}</td>{cells}</tr>'


def render(sweep: str, sets: dict[str, tuple[list[str], list[str]]], shown: list[Column]) -> str:
    """The page: `sets` maps a test set to its (sources, references)."""
    sections = "".join(set_section(name, *texts, shown) for name, texts in sets.items())
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{html.escape(sweep)}: translations</title>'
        f"<style>{STYLE}</style></head><body><h1>Sweep <code>{html.escape(sweep)}</code>: test translations by "
        "variant</h1><p>Each variant's best seed (by test BLEU). <mark>Marked</mark>: words that differ from the "
        "reference. Right of each hypothesis: its sentence chrF (sacrebleu), the row's best in blue. # is the "
        f"sentence's number in the test set.</p>{sections}</body></html>"
    )


def sources_of(tsv: list[str]) -> list[str]:
    """The source column of a trial's translations/<set>.tsv (a header line, then a sentence a line)."""
    at = tsv[0].split("\t").index("source") if tsv else 0
    return [line.split("\t")[at] for line in tsv[1:]]


def write_page(client: MlflowClient, snapshot: SweepSnapshot, summary: Summary, out: Path) -> bool:
    """out/translations.html from the snapshot's test translations and references, the sources read from one
    trial's translations/<set>.tsv (they are the same in every trial); False, and no page, for a sweep whose trials
    logged none (recorded before them)."""
    record = snapshot.records[0]
    try:
        with tempfile.TemporaryDirectory() as folder:
            sets = {
                name: (
                    sources_of(artifact_lines(client, record, f"translations/{name}.tsv", Path(folder))),
                    snapshot.references[name],
                )
                for name in summary.test_sets
            }
    except SummaryError:
        return False
    rows = summary.rows[:MAX_VARIANTS]
    shown = columns(summary, snapshot.translations, row_colours(rows))
    (out / PAGE).write_text(render(snapshot.name, sets, shown), encoding="utf-8")
    return True
