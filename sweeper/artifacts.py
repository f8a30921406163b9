"""What a finished trial leaves for MLflow: traces Parquet, translations, references and plots of a few dev sentences."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from nmt_core.data import surface
from nmt_core.evaluate import ALIGNMENT_STATS, trace_table, write_traces
from nmt_core.registry import is_adaptive
from nmt_core.train import SetResult, TrainResult
from sweeper import plots

N_PLOTTED = 4  # dev sentences shown in the heatmaps: the same ones in every trial


def write_trial_artifacts(result: TrainResult, sets: dict[str, SetResult], out: Path) -> None:
    """out/traces/<set>.parquet, out/translations/<set>.txt and .tsv, out/references/<set>.txt, out/plots/*.png,
    and out/alignment/<set>.tsv (per-sentence link counts for AER's significance test) where gold links exist.

    The references are the raw text BLEU was computed against: `sacrebleu references/test.txt <
    translations/test.txt` with the logged signature's options gives the logged BLEU, and the summary's
    significance test needs no corpus.
    """
    data, cfg = result.data, result.config
    for sub in ("traces", "translations", "references", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, evaluation in sets.items():
        words = [words_of(data.tgt_vocab.decode(t.tokens)) for t in evaluation.translations]  # one per trace row
        write_traces(trace_table(evaluation.translations, words), str(out / "traces" / f"{name}.parquet"))
        (out / "translations" / f"{name}.txt").write_text("\n".join(evaluation.hypotheses) + "\n", encoding="utf-8")
        (out / "references" / f"{name}.txt").write_text("\n".join(data.references[name]) + "\n", encoding="utf-8")
        write_side_by_side(data.sources[name], data.references[name], evaluation.hypotheses,
                           out / "translations" / f"{name}.tsv")
    for name, score in result.alignments.items():
        write_alignment_stats(score.per_sentence, out / "alignment" / f"{name}.tsv")
    dev = sets["dev"]
    shown = range(min(N_PLOTTED, len(dev.translations)))
    if is_adaptive(cfg.attention.temperature):  # a fixed temperature would paint one flat colour
        plots.temperature_heatmap([(words_of(data.tgt_vocab.decode(dev.translations[i].tokens)), dev.translations[i].tau)
                                   for i in shown
                                   if dev.translations[i].tokens], out / "plots" / "temperature_heatmap.png",
                                  cfg.attention.lambda_)
    for i in shown:
        translation = dev.translations[i]
        if not translation.tokens:
            continue
        source = words_of(data.src_vocab.decode(data.splits["dev"][i].src))
        plots.attention_heatmap(source, words_of(data.tgt_vocab.decode(translation.tokens)), translation.weights.numpy(),
                                out / "plots" / f"attention_dev{i}.png", translation.gate, title=f"dev sentence {i}")


def write_side_by_side(sources: list[str], references: list[str], hypotheses: list[str], path: Path) -> None:
    """source, reference and hypothesis per line, tab-separated with a header (MLflow shows .tsv as text;
    a spreadsheet opens it as a table)."""
    def cell(text: str) -> str:
        return text.replace("\t", " ")

    lines = ["source\treference\thypothesis"] + [f"{cell(s)}\t{cell(r)}\t{cell(h)}"
                                                  for s, r, h in zip(sources, references, hypotheses)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def write_alignment_stats(stats: np.ndarray, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, stats, fmt="%.6g", delimiter="\t", header="\t".join(ALIGNMENT_STATS), comments="")


def read_alignment_stats(path: Path) -> np.ndarray:
    return np.loadtxt(path, delimiter="\t", skiprows=1, ndmin=2)


def words_of(tokens: list[str]) -> list[str]:
    """Tokens as a reader sees them in traces and plots (joiners removed)."""
    return [surface(t) for t in tokens]
