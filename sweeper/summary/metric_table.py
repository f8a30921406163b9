"""chrF and TER beside BLEU: each row's mean and std over seeds per test set, and its deltas to its baseline (and a
SACT row's to its controls) tested as BLEU's are: the same two-level test of seeds and test sentences, its
sentence part from the same paired resamples of the same sentences, the statistics sacrebleu's own metric objects
extract per sentence (nmt_core.training.evaluate.MetricBootstrap), Holm-corrected over each metric's comparisons.

Only a sweep whose every trial logged a metric gets its columns: a summary of a sweep (or of its committed data)
from before chrF and TER were scored is written as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nmt_core.training.evaluate import (
    LOWER_IS_BETTER,
    MT_METRICS,
    ApproximateRandomization,
    MetricBootstrap,
)
from sweeper.space.spec import SignificanceSpec
from sweeper.summary.records import TrialRecord
from sweeper.summary.statistics import (
    AR_INTERVAL_RESAMPLES,
    BASELINE,
    Comparison,
    Summary,
    VariantRow,
    compare,
    mark_and_power,
    mean_std,
    pairs_of,
)
from sweeper.tracking.metrics import SIGNATURE_TAGS

LABELS = {"chrf": "chrF", "ter": "TER"}  # as sacrebleu and papers write them


@dataclass
class MetricColumn:
    """One metric over the table's rows: each row's mean and std per test set and on average, and its tests."""

    name: str  # one of MT_METRICS
    signature: str
    sets: dict[int, dict[str, tuple[float, float]]]  # id(row) -> test set -> (mean, std) over seeds
    average: dict[int, tuple[float, float]]  # id(row) -> (mean, std) of the per-trial average over test sets
    comparisons: list[Comparison] = field(default_factory=list)  # against baselines and controls, Holm-corrected

    @property
    def label(self) -> str:
        return LABELS[self.name]

    @property
    def higher_is_better(self) -> bool:
        return self.name not in LOWER_IS_BETTER

    def against_baseline(self, row: VariantRow) -> Comparison | None:
        return next((c for c in self.comparisons if c.row is row and c.kind == BASELINE), None)

    def against_controls(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.control]


@dataclass
class MetricTable:
    columns: list[MetricColumn]
    test_sets: list[str]
    resamples: int
    method: str  # significance.method


def scored_metrics(records: list[TrialRecord]) -> list[str]:
    """The metrics of MT_METRICS every trial logged (`<metric>_test_avg`): none for a sweep from before them."""
    return [name for name in MT_METRICS if all(f"{name}_test_avg" in r.metrics for r in records)]


def metric_table(
    summary: Summary,
    references: dict[str, list[str]],
    translations: dict[str, dict[str, list[str]]],
    significance: SignificanceSpec,
    lowercase: bool,
) -> MetricTable | None:
    """chrF and TER of every row (those every trial logged), each tested against the same baselines and controls
    as BLEU; None where no metric was logged by every trial. `lowercase`: the trials' case (bleu_options)."""
    records = [r for row in summary.rows for r in row.records]
    names = scored_metrics(records)
    if not names:
        return None
    pairs = pairs_of(summary.rows, summary.criteria, summary.controls)
    columns = [column_of(name, summary, pairs, references, translations, significance, lowercase) for name in names]
    return MetricTable(columns, summary.test_sets, significance.resamples, significance.method)


def column_of(
    name: str,
    summary: Summary,
    pairs: list[tuple[VariantRow, VariantRow, str, str]],
    references: dict[str, list[str]],
    translations: dict[str, dict[str, list[str]]],
    significance: SignificanceSpec,
    lowercase: bool,
) -> MetricColumn:
    """One metric's numbers and tests: the seed level from the logged corpus scores (sacrebleu's corpus_score, as
    the table prints them), the sentence level from paired resamples of sacrebleu's per-sentence statistics."""
    randomization = significance.method == "approximate_randomization"
    resamples = AR_INTERVAL_RESAMPLES if randomization else significance.resamples
    bootstrap = MetricBootstrap(references, name, resamples, lowercase=lowercase)
    sizes = {test: len(refs) for test, refs in references.items()}
    shuffles = ApproximateRandomization(bootstrap, sizes, significance.resamples) if randomization else None
    compared = compare(
        pairs,
        lambda row: [r.metrics[f"{name}_test_avg"] for r in row.records],
        bootstrap,
        lambda row: bootstrap.stats([translations[r.run_id] for r in row.records]),
        shuffles,
    )
    mark_and_power(compared, higher_is_better=name not in LOWER_IS_BETTER)  # significance.margin is BLEU points
    rows = summary.rows
    return MetricColumn(
        name,
        rows[0].records[0].tags.get(SIGNATURE_TAGS[f"{name}_signature"], ""),
        {
            id(row): {s: mean_std([r.metrics[f"{name}_test_{s}"] for r in row.records]) for s in summary.test_sets}
            for row in rows
        },
        {id(row): mean_std([r.metrics[f"{name}_test_avg"] for r in row.records]) for row in rows},
        compared,
    )
