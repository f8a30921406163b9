"""What a finished trial leaves for MLflow: traces Parquet (of its own output, and teacher-forced on the test
references), translations, references, and the heatmaps of a few dev sentences (their data always, the drawings
where `tracking.plots` is `all`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from nmt_core.data.batches import TrialData
from nmt_core.data.tokens import surface
from nmt_core.family.registry import bound_of, is_adaptive
from nmt_core.models.transformer import head_labels
from nmt_core.training.evaluate import ALIGNMENT_STATS, forced_trace_table, trace_table, write_traces
from nmt_core.training.train import SetResult, TrainResult, teacher_forced_traces
from sweeper.tracking.metrics import FORCED, HEATMAPS, PLOTS_FOLDER, TRANSLATIONS
from sweeper.tracking.mlflow_tables import write_table

SIDE_BY_SIDE = ("source", "reference", "hypothesis")  # a translations table's columns
# the same as an MLflow table: its evaluation view groups rows by the first column and compares the next one across
# trials by default (MLflow 3.17's EvaluationArtifactCompareView), so the hypothesis comes second
MLFLOW_SIDE_BY_SIDE = ("source", "hypothesis", "reference")
N_PLOTTED = 4  # dev sentences shown in the heatmaps: the same ones in every trial


def write_trial_artifacts(result: TrainResult, sets: dict[str, SetResult], out: Path, draw: bool = True) -> None:
    """out/traces/<set>.parquet, out/traces/forced/<test set>.parquet (write_forced_traces), out/traces/heatmaps.json,
    out/translations/<set>.txt, .tsv and .json (MLflow's table, which its evaluation view compares across trials),
    out/references/<set>.txt, out/alignment/<set>.tsv (per-sentence link counts for AER's significance test) where
    gold links exist, and with `draw` out/plots/*.png (matplotlib costs a small trial a second; the summary can
    draw the same figures later from heatmaps.json).

    The references are the raw text BLEU was computed against: `sacrebleu references/test.txt <
    translations/test.txt` with the logged signature's options gives the logged BLEU, and the summary's
    significance test needs no corpus.
    """
    data = result.data
    for sub in ("traces", TRANSLATIONS, "references"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, evaluation in sets.items():
        words = [words_of(data.tgt_vocab.decode(t.tokens)) for t in evaluation.translations]  # one per trace row
        write_traces(
            trace_table(evaluation.translations, words, head_labels(result.model)),
            str(out / "traces" / f"{name}.parquet"),
        )
        (out / "translations" / f"{name}.txt").write_text("\n".join(evaluation.hypotheses) + "\n", encoding="utf-8")
        (out / "references" / f"{name}.txt").write_text("\n".join(data.references[name]) + "\n", encoding="utf-8")
        write_side_by_side(data.sources[name], data.references[name], evaluation.hypotheses, out / TRANSLATIONS, name)
    write_forced_traces(result, out / FORCED)
    for name, score in result.alignments.items():
        write_alignment_stats(score.per_sentence, out / "alignment" / f"{name}.tsv")
    figures = heatmap_data(result, sets["dev"])
    (out / HEATMAPS).write_text(json.dumps(figures), encoding="utf-8")
    if draw:
        from sweeper.summary.plots import heatmaps  # matplotlib: only in a trial that draws

        heatmaps(figures, out / PLOTS_FOLDER)


def write_forced_traces(result: TrainResult, folder: Path) -> None:
    """folder/<test set>.parquet: tau, the sentinel gate and what the attention parts observe (entmax's zeros, the
    soft-cap's share, ...) at every reference token of each test set, forced through the model as the dev loss is (the
    summary's word classes read them); nothing for a model with none of them."""
    device = next(result.model.parameters()).device
    for name in result.data.test_sets:
        traces = teacher_forced_traces(result.model, result.data.splits[name], result.config, device)
        if traces and (traces[0].tau is not None or traces[0].gate is not None or traces[0].observed):
            folder.mkdir(parents=True, exist_ok=True)
            table = forced_trace_table(traces, reference_words(result.data, name), head_labels(result.model))
            write_traces(table, str(folder / f"{name}.parquet"))


def reference_words(data: TrialData, split: str) -> list[list[str]]:
    """Each reference of `split` as the model reads it: the target tokeniser's tokens (those past a length cut
    left out, as the model never saw them), joiners removed; a word outside the vocabulary keeps its own text."""
    return [
        words_of(data.tgt_segmenter.tokenize(reference)[: len(example.tgt)])
        for reference, example in zip(data.references[split], data.splits[split])
    ]


def heatmap_data(result: TrainResult, dev: SetResult) -> dict[str, Any]:
    """The first N_PLOTTED dev sentences as the heatmaps show them: source and target words, attention weights
    (to 4 decimals: a colour; traces/dev.parquet has them whole), sentinel gates and temperatures; `lambda` only for
    SACT (a fixed temperature would paint one flat colour)."""
    data, attention = result.data, result.config.attention
    sentences = [
        {
            "index": i,
            "source": words_of(data.src_vocab.decode(data.splits["dev"][i].src)),
            "target": words_of(data.tgt_vocab.decode(t.tokens)),
            "weights": t.weights.numpy().round(4).tolist(),
            "gate": t.gate,
            "tau": t.tau,
        }
        for i, t in enumerate(dev.translations[:N_PLOTTED])
        if t.tokens
    ]
    first = dev.translations[0] if dev.translations else None
    heads = None
    if is_adaptive(attention.temperature) and first is not None and first.tau_heads and first.tokens:
        heads = {
            "target": words_of(data.tgt_vocab.decode(first.tokens)),
            "tau_heads": first.tau_heads,
            "labels": head_labels(result.model),
        }  # a Transformer: every layer's heads, dev sentence 0
    return {
        "lambda": bound_of(attention) if is_adaptive(attention.temperature) else None,
        "sentences": sentences,
        "heads": heads,
    }


def write_side_by_side(
    sources: list[str], references: list[str], hypotheses: list[str], folder: Path, name: str
) -> None:
    """source, reference and hypothesis per sentence: `<name>.tsv`, tab-separated with a header (a spreadsheet
    opens it as a table), and `<name>.json`, MLflow's table (its UI shows it as a table, and its evaluation view
    lines up the same sentence of several trials, each trial's hypothesis beside the others')."""

    def cell(text: str) -> str:
        return text.replace("\t", " ")

    rows = list(zip(sources, references, hypotheses))
    lines = ["\t".join(SIDE_BY_SIDE)] + ["\t".join(cell(text) for text in row) for row in rows]
    (folder / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    table = [(source, hypothesis, reference) for source, reference, hypothesis in rows]
    write_table(MLFLOW_SIDE_BY_SIDE, table, folder / f"{name}.json")


def write_alignment_stats(stats: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, stats, fmt="%.6g", delimiter="\t", header="\t".join(ALIGNMENT_STATS), comments="")


def words_of(tokens: list[str]) -> list[str]:
    """Tokens as a reader sees them in traces and plots (joiners removed)."""
    return [surface(t) for t in tokens]
