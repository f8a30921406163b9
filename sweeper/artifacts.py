"""What a finished trial leaves for MLflow: traces Parquet, translations and plots of a few dev sentences."""
from __future__ import annotations

from pathlib import Path

from nmt_core.evaluate import trace_table, write_traces
from nmt_core.train import SetResult, TrainResult
from sweeper import plots

N_PLOTTED = 4  # dev sentences shown in the heatmaps: the same ones in every trial


def write_trial_artifacts(result: TrainResult, sets: dict[str, SetResult], out: Path) -> None:
    """out/traces/<set>.parquet, out/translations/<set>.txt, out/plots/*.png."""
    data, cfg = result.data, result.config
    for sub in ("traces", "translations", "plots"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for name, evaluation in sets.items():
        words = [data.tgt_vocab.decode(t.tokens) for t in evaluation.translations]  # one per trace row
        write_traces(trace_table(evaluation.translations, words), str(out / "traces" / f"{name}.parquet"))
        (out / "translations" / f"{name}.txt").write_text("\n".join(evaluation.hypotheses) + "\n", encoding="utf-8")
    dev = sets["dev"]
    shown = range(min(N_PLOTTED, len(dev.translations)))
    if cfg.attention.temperature == "sact":  # a fixed temperature would paint one flat colour
        plots.temperature_heatmap([(data.tgt_vocab.decode(dev.translations[i].tokens), dev.translations[i].tau) for i in shown
                                   if dev.translations[i].tokens], out / "plots" / "temperature_heatmap.png",
                                  cfg.attention.lambda_)
    for i in shown:
        translation = dev.translations[i]
        if not translation.tokens:
            continue
        source = data.src_vocab.decode(data.splits["dev"][i].src)
        plots.attention_heatmap(source, data.tgt_vocab.decode(translation.tokens), translation.weights.numpy(),
                                out / "plots" / f"attention_dev{i}.png", translation.gate, title=f"dev sentence {i}")
