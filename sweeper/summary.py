"""The papers' tables and figures from a finished sweep, read back from MLflow (never from trial memory).

- BLEU table (SACT Tables 1-2, Li & Zhu Table 1): a row per variant (seeds grouped), mean +- sample std,
  #params, time per epoch, delta to the baseline with a paired-bootstrap mark (* p < 0.05, ** p < 0.01).
- Fixed-tau curve (SACT Figure 1), temperature heatmaps (Figure 2), sentinel words (Li & Zhu Table 2),
  and mean tau / gate for frequent (function) versus other (content) target words.
"""
from __future__ import annotations

import csv
import io
import os
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml
from mlflow.tracking import MlflowClient

from nmt_core.config import ConfigError, build_config, set_dotted
from nmt_core.data import load_trial_data
from nmt_core.evaluate import paired_bootstrap
from sweeper import plots
from sweeper.tracking import ROLE, TRIAL_ID, VARIANT

os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file is noise here

SEED_KEY = "train.seed"
FREQUENT_WORDS = 50  # the target's most frequent words stand for function words (no stop-word lists yet)
SENTINEL_THRESHOLD = 0.9  # Li & Zhu Table 2


class SummaryError(ValueError):
    """A sweep that cannot be summarised; the message says why and what to do."""


@dataclass
class TrialRecord:
    run_id: str
    trial_id: str
    variant: str
    params: dict[str, str]
    metrics: dict[str, float]
    epoch_time_s: float | None

    @property
    def group(self) -> tuple:
        return tuple(sorted((k, v) for k, v in self.params.items() if k != SEED_KEY))

    @property
    def test_sets(self) -> list[str]:
        return sorted(k.removeprefix("bleu_test_") for k in self.metrics
                      if k.startswith("bleu_test_") and k != "bleu_test_avg")


@dataclass
class VariantRow:
    label: str
    records: list[TrialRecord]
    tests: dict[str, tuple[float, float]]  # set -> (mean, std) over seeds
    average: tuple[float, float]
    n_params: int
    epoch_time_s: float | None
    delta: float | None = None
    mark: str = ""
    p_value: float | None = None
    is_baseline: bool = False


@dataclass
class Summary:
    rows: list[VariantRow]
    test_sets: list[str]
    notes: list[str] = field(default_factory=list)
    signature: str = ""


def mean_std(values: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for a single run)."""
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def find_parent(client: MlflowClient, name: str, run_id: str | None = None) -> tuple[str, str]:
    """The sweep's parent run: `run_id` when given (an older sweep of the same name), else the newest."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        known = sorted(e.name for e in client.search_experiments() if e.name != "Default")
        raise ConfigError("NAME", f"no sweep named {name!r} in {client.tracking_uri} (check --tracking-uri); "
                          f"sweeps there: {', '.join(known) or 'none'}", "sweeper summarize")
    parents = client.search_runs([experiment.experiment_id], filter_string=f"tags.`{ROLE}` = 'sweep'",
                                 order_by=["attributes.start_time DESC"], max_results=1000)
    if not parents:
        raise SummaryError(f"sweep {name!r} has no sweep run in this tracking store")
    if run_id is None:
        return experiment.experiment_id, parents[0].info.run_id
    if run_id not in {p.info.run_id for p in parents}:
        raise ConfigError("--run-id", f"{run_id} is not a sweep run of {name!r}; its sweep runs, newest first: "
                          + ", ".join(p.info.run_id for p in parents[:5]), "sweeper summarize")
    return experiment.experiment_id, run_id


def load_records(client: MlflowClient, experiment_id: str, parent_id: str) -> list[TrialRecord]:
    """The finished trials of one `sweeper run` (the newest, unless a parent run id is given)."""
    runs = client.search_runs([experiment_id], max_results=5000,
                              filter_string=f"tags.`mlflow.parentRunId` = '{parent_id}' and tags.`{ROLE}` = 'trial'")
    records = []
    for run in runs:
        if run.info.status != "FINISHED" or "bleu_test_avg" not in run.data.metrics:
            continue
        times = [m.value for m in client.get_metric_history(run.info.run_id, "epoch_time_s")]
        records.append(TrialRecord(run.info.run_id, run.data.tags.get(TRIAL_ID, ""), run.data.tags.get(VARIANT, "?"),
                                   dict(run.data.params), dict(run.data.metrics),
                                   statistics.fmean(times) if times else None))
    return records


def _matches(record: TrialRecord, criteria: dict[str, Any]) -> bool:
    return all(record.params.get(k) == str(v) for k, v in criteria.items())


DEFAULT_BASELINE = {"attention.temperature": "none", "attention.sentinel": "False"}


def choose_baseline(rows: list[VariantRow], row: VariantRow, criteria: dict[str, Any]) -> VariantRow | None:
    """The baseline row sharing the most settings with `row` (concat+sact is compared with concat+none)."""
    candidates = [r for r in rows if _matches(r.records[0], criteria)]
    if not candidates:
        return None
    mine = dict(row.records[0].group)
    return max(candidates, key=lambda c: sum(mine.get(k) == v for k, v in c.records[0].group))


def _short(value: str | None) -> str:
    try:
        return f"{float(value):.3g}"
    except (TypeError, ValueError):
        return str(value)


def distinguish(rows: list[VariantRow]) -> None:
    """Rows that share a variant label (random and Optuna sweeps vary more than attention) get the settings
    that tell them apart appended, e.g. `general+none (train.lr=0.00125)`."""
    by_label: dict[str, list[VariantRow]] = {}
    for row in rows:
        by_label.setdefault(row.label, []).append(row)
    for same in by_label.values():
        if len(same) < 2:
            continue
        settings = [dict(row.records[0].group) for row in same]
        differing = sorted(k for k in set().union(*settings) if len({s.get(k) for s in settings}) > 1)
        for row, setting in zip(same, settings):
            row.label += " (" + ", ".join(f"{k}={_short(setting.get(k))}" for k in differing) + ")"


def pooled_translations(records: list[TrialRecord], translations: dict[str, dict[str, list[str]]],
                        test_sets: list[str]) -> dict[str, list[str]]:
    """Seed -> hypotheses of every test set, concatenated (the bootstrap unit is a test sentence)."""
    return {r.params.get(SEED_KEY, "?"): [h for s in test_sets for h in translations[r.run_id][s]] for r in records}


def build_summary(records: list[TrialRecord], translations: dict[str, dict[str, list[str]]],
                  references: dict[str, list[str]], baseline: dict[str, Any] | None = None,
                  bleu_options: dict[str, Any] | None = None, resamples: int = 1000) -> Summary:
    """The BLEU table; `translations[run_id][set]` and `references[set]` feed the paired bootstrap."""
    if not records:
        raise SummaryError("no finished trial with test BLEU in this sweep yet")
    criteria = {k: str(v) for k, v in (baseline or DEFAULT_BASELINE).items()}
    test_sets = records[0].test_sets
    groups: dict[tuple, list[TrialRecord]] = {}
    for record in records:
        groups.setdefault(record.group, []).append(record)
    rows = []
    for members in groups.values():
        tests = {s: mean_std([r.metrics[f"bleu_test_{s}"] for r in members]) for s in test_sets}
        times = [r.epoch_time_s for r in members if r.epoch_time_s is not None]
        rows.append(VariantRow(members[0].variant, members, tests, mean_std([r.metrics["bleu_test_avg"] for r in members]),
                               int(members[0].metrics.get("n_params", 0)), statistics.fmean(times) if times else None))
    distinguish(rows)
    rows.sort(key=lambda r: (not _matches(r.records[0], criteria), r.label))
    summary = Summary(rows, test_sets)
    if not any(_matches(r.records[0], criteria) for r in rows):
        summary.notes.append("no baseline variant (" + ", ".join(f"{k}={v}" for k, v in criteria.items())
                             + ") in this sweep: deltas are left out")
        return summary
    all_refs = [ref for s in test_sets for ref in references[s]]
    for row in rows:
        base = choose_baseline(rows, row, criteria)
        row.is_baseline = base is row
        if row.is_baseline or base is None:
            continue
        row.delta = row.average[0] - base.average[0]
        system = pooled_translations(row.records, translations, test_sets)
        reference = pooled_translations(base.records, translations, test_sets)
        seeds = [seed for seed in system if seed in reference] or list(system)[:1]  # seed-matched pairs
        system_hyps, baseline_hyps = [], []
        for seed in seeds:
            system_hyps += system[seed]
            baseline_hyps += reference.get(seed, next(iter(reference.values())))
        result = paired_bootstrap(baseline_hyps, system_hyps, all_refs * len(seeds), resamples=resamples,
                                  **(bleu_options or {}))
        row.p_value, row.mark = result.p_value, result.mark
    return summary


def _cells(row: VariantRow, test_sets: list[str], plus_minus: str) -> list[str]:
    def fmt(mean_and_std: tuple[float, float]) -> str:
        mean, std = mean_and_std
        return f"{mean:.2f}" if len(row.records) == 1 else f"{mean:.2f} {plus_minus} {std:.2f}"

    delta = "baseline" if row.is_baseline else "" if row.delta is None else f"{row.delta:+.2f}{row.mark}"
    time = "" if row.epoch_time_s is None else f"{row.epoch_time_s:.1f}"
    return [row.label, str(len(row.records)), *(fmt(row.tests[s]) for s in test_sets), fmt(row.average),
            f"{row.n_params / 1e6:.2f}M", time, delta]


def table_header(test_sets: list[str]) -> list[str]:
    return ["variant", "runs", *test_sets, "avg", "#params", "s/epoch", "delta avg"]


def render_markdown(summary: Summary) -> str:
    header = table_header(summary.test_sets)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cells(row, summary.test_sets, "±")) + " |" for row in summary.rows]
    lines.append("")
    lines.append("BLEU mean ± sample std over seeds; delta: paired bootstrap over test sentences "
                 "(1000 resamples, * p < 0.05, ** p < 0.01)." + (f" Signature: {summary.signature}" if summary.signature else ""))
    lines += [f"Note: {note}" for note in summary.notes]
    return "\n".join(lines) + "\n"


def render_csv(summary: Summary) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["variant", "runs", *[f"{s}_{x}" for s in summary.test_sets for x in ("mean", "std")],
                     "avg_mean", "avg_std", "n_params", "epoch_time_s", "delta_avg", "p_value"])
    for row in summary.rows:
        writer.writerow([row.label, len(row.records), *[f"{v:.4f}" for s in summary.test_sets for v in row.tests[s]],
                         f"{row.average[0]:.4f}", f"{row.average[1]:.4f}", row.n_params,
                         "" if row.epoch_time_s is None else f"{row.epoch_time_s:.3f}",
                         "" if row.delta is None else f"{row.delta:.4f}", "" if row.p_value is None else row.p_value])
    return out.getvalue()


def render_latex(summary: Summary) -> str:
    header = table_header(summary.test_sets)
    escape = str.maketrans({"_": r"\_", "+": r"{+}", "#": r"\#", "%": r"\%"})
    lines = [r"\begin{tabular}{l" + "r" * (len(header) - 1) + "}", r"\toprule",
             " & ".join(h.translate(escape) for h in header) + r" \\", r"\midrule"]
    for row in summary.rows:
        cells = [c.translate(escape).replace("±", r"$\pm$") for c in _cells(row, summary.test_sets, "±")]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def read_trace(client: MlflowClient, run_id: str, name: str, folder: Path):
    local = client.download_artifacts(run_id, f"traces/{name}.parquet", str(folder))
    return pq.read_table(local)


def token_stats(table, frequent: int = FREQUENT_WORDS) -> dict[str, Any]:
    """Mean tau and gate of the most frequent output words (function words) against the rest."""
    tokens = table.column("token").to_pylist()
    top = {w for w, _ in Counter(tokens).most_common(frequent)}
    out: dict[str, Any] = {}
    for column in ("tau", "sentinel"):
        values = table.column(column).to_pylist()
        if values and values[0] is not None:
            function = [v for w, v in zip(tokens, values) if w in top]
            content = [v for w, v in zip(tokens, values) if w not in top]
            out[column] = (statistics.fmean(function) if function else float("nan"),
                           statistics.fmean(content) if content else float("nan"))
    return out


def sentinel_words(table, threshold: float = SENTINEL_THRESHOLD, top: int = 15) -> list[tuple[str, int]]:
    tokens, gates = table.column("token").to_pylist(), table.column("sentinel").to_pylist()
    return Counter(w for w, g in zip(tokens, gates) if g is not None and g >= threshold).most_common(top)


def trial_config_of(record: TrialRecord):
    nested: dict[str, Any] = {}
    for key, value in record.params.items():
        set_dotted(nested, key, yaml.safe_load(value) if value != "" else "")
    return build_config(nested)


def summarize(name: str, tracking_uri: str, out: Path, formats: list[str], resamples: int = 1000,
              run_id: str | None = None) -> Summary:
    """Write summary.md (+ csv / tex), figures, and log them to the sweep's parent run."""
    client = MlflowClient(tracking_uri)
    experiment_id, parent_id = find_parent(client, name, run_id)
    records = load_records(client, experiment_id, parent_id)
    if not records:
        raise SummaryError(f"sweep {name!r} has no finished trial with test BLEU yet (see `sweeper resume`)")
    parent = client.get_run(parent_id)
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        try:
            space = yaml.safe_load(Path(client.download_artifacts(parent_id, "space.yaml", tmp)).read_text()) or {}
        except Exception:  # an older sweep without space.yaml: default baseline
            space = {}
        cfg = trial_config_of(records[0])
        data = load_trial_data(cfg.data)
        test_sets = records[0].test_sets
        translations = {}
        for record in records:
            translations[record.run_id] = {}
            for s in test_sets:
                path = client.download_artifacts(record.run_id, f"translations/{s}.txt", str(tmp_path / record.run_id))
                translations[record.run_id][s] = Path(path).read_text(encoding="utf-8").splitlines()
        bleu_options = {"tokenize": cfg.decode.bleu_tokenize, "lowercase": cfg.decode.bleu_lowercase}
        summary = build_summary(records, translations, {s: data.references[s] for s in test_sets},
                                space.get("baseline"), bleu_options, resamples)
        summary.signature = f"tok:{cfg.decode.bleu_tokenize}|case:{'lc' if cfg.decode.bleu_lowercase else 'mixed'}"
        out.mkdir(parents=True, exist_ok=True)
        sections = [f"# Sweep `{name}`\n", f"MLflow parent run `{parent_id}` ({parent.info.status}); "
                    f"{len(records)} finished trials.\n", "## BLEU\n", render_markdown(summary)]
        sections += _figures(client, summary, out, tmp_path)
        (out / "summary.md").write_text("\n".join(sections), encoding="utf-8")
        if "csv" in formats:
            (out / "bleu_table.csv").write_text(render_csv(summary), encoding="utf-8")
        if "latex" in formats:
            (out / "bleu_table.tex").write_text(render_latex(summary), encoding="utf-8")
    client.log_artifacts(parent_id, str(out), "summary")
    return summary


def _figures(client: MlflowClient, summary: Summary, out: Path, tmp: Path) -> list[str]:
    """Fixed-tau curve, temperature heatmap, sentinel words and function/content tau, where the sweep has them."""
    sections = []
    fixed = [r for r in summary.rows if r.records[0].params.get("attention.temperature") == "fixed"]
    sact = [r for r in summary.rows if r.records[0].params.get("attention.temperature") == "sact"]
    if fixed:
        best_sact = max(sact, key=lambda r: r.average[0]) if sact else None
        plots.fixed_tau_curve([(float(r.records[0].params["attention.tau"]), *r.average) for r in fixed],
                              best_sact.average if best_sact else None,
                              [out / "fixed_tau_curve.png", out / "fixed_tau_curve.svg"])
        sections.append("## Fixed temperature vs SACT (SACT Figure 1)\n\n![fixed tau](fixed_tau_curve.png)\n")
    if sact:
        best = max((rec for r in sact for rec in r.records), key=lambda rec: rec.metrics["bleu_test_avg"])
        dev = read_trace(client, best.run_id, "dev", tmp / "trace")
        sentences = {}
        for sent_id, token, tau in zip(*(dev.column(c).to_pylist() for c in ("sent_id", "token", "tau"))):
            if sent_id < 4:
                sentences.setdefault(sent_id, ([], []))
                sentences[sent_id][0].append(token)
                sentences[sent_id][1].append(tau)
        if sentences:
            plots.temperature_heatmap(list(sentences.values()), out / "temperature_heatmap.png",
                                      float(best.params["attention.lambda"]))
            sections.append(f"## Temperature heatmap (SACT Figure 2), best SACT trial `{best.variant}`\n\n"
                            "![tau heatmap](temperature_heatmap.png)\n")
    stats_lines = []
    for row in summary.rows:
        params = row.records[0].params
        if params.get("attention.temperature") != "sact" and params.get("attention.sentinel") != "True":
            continue  # a constant temperature and no gate: nothing to compare
        record = max(row.records, key=lambda rec: rec.metrics["bleu_test_avg"])
        table = read_trace(client, record.run_id, summary.test_sets[0], tmp / "trace" / record.run_id)
        stats = token_stats(table)
        cells = [f"{stats[c][0]:.3f} / {stats[c][1]:.3f}" if c in stats else "" for c in ("tau", "sentinel")]
        stats_lines.append(f"| {row.label} | {cells[0]} | {cells[1]} |")
        if "sentinel" in stats:
            words = sentinel_words(table)
            sections.append(f"## Words with sentinel gate >= {SENTINEL_THRESHOLD} (Li & Zhu Table 2), `{row.label}`\n\n"
                            + ("| word | count |\n|---|---|\n" + "\n".join(f"| {w} | {n} |" for w, n in words)
                               if words else "none on this test set") + "\n")
    if stats_lines:
        sections.append(f"## Function vs content words ({summary.test_sets[0]})\n\nMean over output tokens: the "
                        f"{FREQUENT_WORDS} most frequent output words (function words) / the rest (content words).\n\n"
                        "| variant | tau | sentinel gate |\n|---|---|---|\n" + "\n".join(stats_lines) + "\n")
    return sections

