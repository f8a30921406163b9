"""BLEU with its sacrebleu signature, paired bootstrap resampling, and per-token traces as Arrow tables."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sacrebleu.metrics import BLEU

from nmt_core.decode import Translation

TRACE_SCHEMA = pa.schema([
    ("sent_id", pa.int32()), ("pos", pa.int32()), ("token", pa.string()),
    ("tau", pa.float32()), ("sentinel", pa.float32()), ("entropy", pa.float32()),
    ("argmax_src", pa.int32()), ("weights", pa.list_(pa.float32())),
])


@dataclass
class BleuResult:
    score: float
    signature: str

    def __str__(self) -> str:
        return f"BLEU {self.score:.2f}  ({self.signature})"


def bleu_metric(tokenize: str = "13a", lowercase: bool = False) -> BLEU:
    """`tokenize="none"` on tokenised text is what multi-bleu.perl computes (the SACT paper's number).

    force=True: we score our own tokenised output on purpose, so sacrebleu's detokenisation warning is noise.
    """
    return BLEU(tokenize=tokenize, lowercase=lowercase, force=True)


def corpus_bleu(hypotheses: list[str], references: list[str], tokenize: str = "13a",
                lowercase: bool = False) -> BleuResult:
    metric = bleu_metric(tokenize, lowercase)
    score = metric.corpus_score(hypotheses, [references])
    return BleuResult(score.score, str(metric.get_signature()))


def _sentence_stats(metric: BLEU, hypotheses: list[str], references: list[str]) -> np.ndarray:
    """(N, 2 + 2 * 4) per-sentence sufficient statistics: hyp len, ref len, matches and totals per order."""
    return np.array(metric._extract_corpus_statistics(hypotheses, [references]), dtype=np.int64)


def _bleu_from_stats(metric: BLEU, stats: np.ndarray) -> np.ndarray:
    """BLEU of each row of summed statistics, scored by sacrebleu itself (same smoothing)."""
    return np.array([metric._compute_score_from_stats(row.tolist()).score for row in stats])


@dataclass
class BootstrapResult:
    delta: float  # BLEU(system) - BLEU(baseline) on the full set
    p_value: float  # share of resamples where the system is not better than the baseline

    @property
    def mark(self) -> str:
        return "**" if self.p_value < 0.01 else "*" if self.p_value < 0.05 else ""


def paired_bootstrap(baseline: list[str], system: list[str], references: list[str], resamples: int = 1000,
                     seed: int = 12345, tokenize: str = "13a", lowercase: bool = False) -> BootstrapResult:
    """Koehn (2004): resample test sentences with replacement, count how often the system does not win."""
    metric = bleu_metric(tokenize, lowercase)
    base_stats = _sentence_stats(metric, baseline, references)
    sys_stats = _sentence_stats(metric, system, references)
    sample = np.random.default_rng(seed).integers(0, len(references), size=(resamples, len(references)))
    base_bleu = _bleu_from_stats(metric, base_stats[sample].sum(axis=1))
    sys_bleu = _bleu_from_stats(metric, sys_stats[sample].sum(axis=1))
    full = _bleu_from_stats(metric, np.stack([sys_stats.sum(0), base_stats.sum(0)]))
    return BootstrapResult(float(full[0] - full[1]), float((sys_bleu <= base_bleu).mean()))


def trace_table(translations: list[Translation], target_words: list[list[str]]) -> pa.Table:
    """One row per output token: tau_t, sentinel gate, attention entropy, argmax and the weights."""
    columns: dict[str, list] = {name: [] for name in TRACE_SCHEMA.names}
    for sent_id, (translation, words) in enumerate(zip(translations, target_words)):
        weights = translation.weights.numpy()
        for pos, word in enumerate(words):
            row = weights[pos]
            columns["sent_id"].append(sent_id)
            columns["pos"].append(pos)
            columns["token"].append(word)
            columns["tau"].append(None if translation.tau is None else translation.tau[pos])
            columns["sentinel"].append(None if translation.gate is None else translation.gate[pos])
            positive = row[row > 0]
            columns["entropy"].append(float(-(positive * np.log(positive)).sum()))
            columns["argmax_src"].append(int(row.argmax()))
            columns["weights"].append(row.astype(np.float32))
    return pa.table(columns, schema=TRACE_SCHEMA)


@dataclass
class AlignmentScore:
    aer: float  # alignment error rate of the attention argmax (Och & Ney 2003; sure = possible = gold)
    gold_mass: float  # mean attention weight on gold-linked source words, over target words that have links


def alignment_error_rate(predicted: set[tuple[int, int]], sure: set[tuple[int, int]],
                         possible: set[tuple[int, int]] | None = None) -> float:
    """AER = 1 - (|A & S| + |A & P|) / (|A| + |S|), with S a subset of P."""
    possible = sure | (possible or set())
    if not predicted and not sure:
        return 0.0
    return 1.0 - (len(predicted & sure) + len(predicted & possible)) / (len(predicted) + len(sure))


def attention_alignment(weights: list[np.ndarray], gold: list[list[tuple[int, int]]]) -> AlignmentScore:
    """weights[i] (target words, source words) of sentence i against its gold (src, tgt) links.

    AER is computed over the whole set (links pooled over sentences), as alignment toolkits report it.
    """
    predicted_all, gold_all, masses = set(), set(), []
    for sent, (matrix, links) in enumerate(zip(weights, gold)):
        if not links:
            continue
        predicted_all |= {(sent, int(matrix[t].argmax()), t) for t in range(matrix.shape[0])}
        gold_all |= {(sent, s, t) for s, t in links}
        by_target: dict[int, list[int]] = {}
        for s, t in links:
            by_target.setdefault(t, []).append(s)
        masses += [float(matrix[t, sources].sum()) for t, sources in by_target.items() if t < matrix.shape[0]]
    return AlignmentScore(alignment_error_rate(predicted_all, gold_all), float(np.mean(masses)) if masses else math.nan)


def write_traces(table: pa.Table, path: str) -> None:
    pq.write_table(table, path)

