"""What chrF and TER cost beside BLEU (issue 73), on real outputs: a committed study's Tatoeba test set (2,785
sentences of the RNN headline's trials, docs/results/sact_study_tatoeba_cpu_power/data), cut to --sentences.

Per metric: the corpus score a trial logs (sacrebleu's corpus_score: on dev every epoch for BLEU and chrF, on every
test set once for all three), and the per-sentence statistics against cached references the summary's paired
bootstrap extracts for each seed of each row; then one row's bootstrap scoring of --resamples resamples.

    python benchmarks/mt_metrics.py --sentences 400 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nmt_core.training.evaluate import (  # noqa: E402
    MT_METRICS,
    MetricBootstrap,
    PairedBootstrap,
    bleu_metric,
    mt_metric,
)

DATA = Path(__file__).resolve().parents[1] / "docs" / "results" / "sact_study_tatoeba_cpu_power" / "data"


def outputs(sentences: int) -> tuple[list[str], list[str]]:
    """The first trial's hypotheses and the references of the committed test set, the first `sentences` of each."""
    references = pq.read_table(DATA / "references.parquet").column("reference").to_pylist()[:sentences]
    table = pq.read_table(DATA / "sentences.parquet", columns=["run_id", "hypothesis"]).to_pylist()
    first = table[0]["run_id"]
    return [row["hypothesis"] for row in table if row["run_id"] == first][:sentences], references


def seconds(work: Callable[[], object], repeat: int) -> float:
    """The median wall time of `repeat` runs of `work`."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(sentences: int, repeat: int, resamples: int) -> list[tuple[str, float, float, float]]:
    """(metric, corpus score s, sentence statistics s, bootstrap scoring s) for BLEU, chrF and TER."""
    hyps, refs = outputs(sentences)
    rows = []
    for name in ("bleu", *MT_METRICS):
        metric = bleu_metric(lowercase=True) if name == "bleu" else mt_metric(name, lowercase=True)
        boot = (
            PairedBootstrap({"test": refs}, resamples, lowercase=True)
            if name == "bleu"
            else MetricBootstrap({"test": refs}, name, resamples, lowercase=True)
        )
        scored = seconds(lambda metric=metric: metric.corpus_score(hyps, [refs]), repeat)
        extracted = seconds(lambda boot=boot: boot.stats([{"test": hyps}]), repeat)
        stats = boot.stats([{"test": hyps}])
        resampled = seconds(lambda boot=boot, stats=stats: boot.scores_of_stats(stats), repeat)
        rows.append((name, scored, extracted, resampled))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=400, help="test sentences (at most 2,785)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, the median reported")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    args = parser.parse_args(argv)
    print(f"| metric | corpus score (s) | sentence stats (s) | {args.resamples} resamples scored (s) |")
    print("|---|---|---|---|")
    for name, scored, extracted, resampled in measure(args.sentences, args.repeat, args.resamples):
        print(f"| {name} | {scored:.3g} | {extracted:.3g} | {resampled:.3g} |")
    print(f"({args.sentences} sentences of Tatoeba En-Es test output, median of {args.repeat})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
