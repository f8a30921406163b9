"""How `sweeper summarize` scales with the number of trials: a real `mlflow server` filled with a random sweep.

    python benchmarks/summary_scale.py [--trials 100 1000] [--writers 4] [--folder DIR] [--profile DIR]
                                       [--json out.json]

For each size: a fresh `mlflow server` (SQLite backend, proxied artifacts, one worker) on 127.0.0.1 is filled by
the tool's own tracking code, as a sweep's driver fills it: `SweepTracker.start_sweep` opens the parent run and
`MlflowTrackingCallback` receives what Tune hands it for every trial (its start, ten epochs of results, the final
result, its completion with the final checkpoint's artifacts folder: translations, references, attention traces).
Trials are a random search over the attention mechanism, its temperature and the learning rate (every trial its
own BLEU table row), with synthetic translations of the 200-sentence synthetic test set scored by sacrebleu. The
fill is timed on its own (`--writers` callbacks send at once, as concurrent drivers' sender threads would);
then `sweeper summarize` runs as a subprocess and its wall time and peak memory (max RSS) are reported. No model
is logged: the summary does not read it, and its upload is the sweep's cost, not the summary's.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
import yaml
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from nmt_core.config import build_config  # noqa: E402 (after the checkout's root joins sys.path)
from nmt_core.data.batches import load_trial_data  # noqa: E402 (after the checkout's root joins sys.path)
from nmt_core.training.decode import Translation  # noqa: E402 (after the checkout's root joins sys.path)
from nmt_core.training.evaluate import (  # noqa: E402 (after the checkout's root joins sys.path)
    corpus_bleu,
    trace_table,
    write_traces,
)
from sweeper.running.artifacts import write_side_by_side  # noqa: E402 (after the checkout's root joins sys.path)
from sweeper.tracking.metrics import ARTIFACTS, FINAL  # noqa: E402 (after the checkout's root joins sys.path)
from sweeper.tracking.runs import (  # noqa: E402 (after the checkout's root joins sys.path)
    MlflowTrackingCallback,
    SweepTracker,
)
from tests.servers import MlflowServer  # noqa: E402 (after the checkout's root joins sys.path)

EPOCHS = 10
DATA = {"corpus": "synthetic", "eval_subset": 200}
BASE = {"data": DATA, "train": {"epochs": EPOCHS}}
KINDS = {
    "none": {"temperature": "none"},
    "fixed": {"temperature": "fixed"},
    "sact": {"temperature": "sact"},
    "sentinel": {"temperature": "none", "sentinel": True},
}
SYSTEM = ("cpu_utilization_percentage", "system_memory_usage_megabytes", "process_memory_rss_megabytes")


def trial_params(rng: random.Random, kind: str) -> dict[str, Any]:
    """A random search's draw: the mechanism, its temperature where it has one, the learning rate, the seed."""
    params = {f"attention.{k}": v for k, v in KINDS[kind].items()}
    params["train.lr"] = round(10 ** rng.uniform(-3.5, -2), 6)
    if kind == "fixed":
        params["attention.tau"] = round(rng.uniform(0.5, 2.0), 3)
    if kind == "sact":
        params["attention.lambda"] = round(rng.uniform(1.5, 8.0), 2)
    return params


def hypotheses(rng: random.Random, references: list[str], quality: float) -> list[str]:
    """A system's output: each reference word kept with probability `quality`, else replaced."""
    return [" ".join(w if rng.random() < quality else "wrong" for w in ref.split()) for ref in references]


def traces(kind: str, words: list[list[str]], folder: Path) -> None:
    """traces/{dev,test}.parquet as a trial writes them (tau for SACT, the gate with a sentinel); one per kind."""
    translations = []
    for sentence in words:
        n = len(sentence)
        tau = [1.0 + (i % 4) for i in range(n)] if kind == "sact" else None
        gate = [0.95 if i % 3 == 0 else 0.1 for i in range(n)] if kind == "sentinel" else None
        translations.append(Translation(list(range(5, 5 + n)), 0.0, torch.full((n, 6), 1 / 6), tau, gate))
    (folder / "traces").mkdir(parents=True)
    for split in ("dev", "test"):
        write_traces(trace_table(translations, words), str(folder / "traces" / f"{split}.parquet"))


def write_artifacts(
    folder: Path, references: list[str], sources: list[str], output: list[str], trace_of_kind: Path
) -> None:
    """The final checkpoint's artifacts folder, as sweeper.running.artifacts.write_trial_artifacts lays it out."""
    out = folder / ARTIFACTS
    shutil.copytree(trace_of_kind, out)
    for sub in ("translations", "references"):
        (out / sub).mkdir()
    for split in ("dev", "test"):
        (out / "translations" / f"{split}.txt").write_text("\n".join(output) + "\n", encoding="utf-8")
        (out / "references" / f"{split}.txt").write_text("\n".join(references) + "\n", encoding="utf-8")
        write_side_by_side(sources, references, output, out / "translations", split)


def epoch_result(epoch: int, bleu: float, kind: str, rng: random.Random) -> dict[str, Any]:
    """One epoch's report with the keys a real trial's carries (diagnostics by mechanism, system metrics)."""
    dev = bleu * (1 - math.exp(-epoch / 3))
    result = {
        "epoch": epoch,
        "train_loss": 4 / epoch,
        "dev_loss": 4.5 / epoch,
        "dev_ppl": math.exp(4.5 / epoch),
        "bleu_dev": dev,
        "epoch_time_s": 2 + rng.random(),
        "tokens_per_s": 9000 + 500 * rng.random(),
        "attn_score_range": 8.0,
        "attn_entropy": 1.2,
        "attn_saturated": 0.1,
        **{f"system/{key}": 50 * rng.random() for key in SYSTEM},
    }
    if kind == "sact":
        result.update(tau_mean=2.0, tau_std=0.5, tau_p5=1.1, tau_p50=2.0, tau_p95=3.5, tau_at_bound=0.01)
    if kind == "sentinel":
        result.update(gate_mean=0.4, gate_collapsed=0.0)
    if epoch == 1:
        result.update({"provenance.node": "bench", "provenance.device": "cpu"})
    return result


def make_trials(n: int, folder: Path, seed: int = 0) -> list[dict[str, Any]]:
    """n trials: each a Tune-like trial object, its ten epoch results and its final result; artifacts on disk."""
    data = load_trial_data(build_config({"data": DATA}).data, log=lambda _: None)
    references, sources = data.references["test"], data.sources["test"]
    words = [ref.split() for ref in references]
    kinds = {}
    for kind in KINDS:
        traces(kind, words, folder / "kinds" / kind)
        kinds[kind] = folder / "kinds" / kind
    rng, trials = random.Random(seed), []
    for i in range(n):
        kind = rng.choice(list(KINDS))
        output = hypotheses(rng, references, rng.uniform(0.5, 0.8))
        scored = corpus_bleu(output, references)
        write_artifacts(folder / f"trial{i}", references, sources, output, kinds[kind])
        config = {"trial": {"params": trial_params(rng, kind), "seed": rng.randint(1, 5)}}
        final = {
            "epoch": EPOCHS,
            "bleu_dev": scored.score,
            "bleu_test_test": scored.score,
            "bleu_test_avg": scored.score,
            "multibleu_test_test": scored.score + 1,
            "multibleu_test_avg": scored.score + 1,
            "n_params": 1_500_000,
            "best_epoch": EPOCHS,
            "bleu_dev_final_beam": scored.score,
            "bleu_signature": scored.signature,
            "multibleu_signature": scored.signature,
            "restores": 0,
            FINAL: 1,
        }
        trial = SimpleNamespace(
            trial_id=f"{i:05d}",
            config=config,
            last_result=final,
            checkpoint=SimpleNamespace(path=str(folder / f"trial{i}")),
        )
        trials.append(
            {
                "trial": trial,
                "epochs": [epoch_result(e, scored.score, kind, rng) for e in range(1, EPOCHS + 1)],
                "final": final,
            }
        )
    return trials


def drive(callback: MlflowTrackingCallback, trials: list[dict[str, Any]]) -> None:
    """What Tune calls on the driver's callback for each trial, in order; then wait until all of it is sent."""
    for item in trials:
        trial = item["trial"]
        callback.on_trial_start(0, [], trial)
        for result in [*item["epochs"], item["final"]]:
            callback.on_trial_result(0, [], trial, result)
        callback.on_trial_complete(0, [], trial)
    callback.drain()


def fill(uri: str, name: str, trials: list[dict[str, Any]], writers: int) -> float:
    """Seconds to write the sweep: its parent run, then every trial through `writers` tracking callbacks."""
    start = time.perf_counter()
    space = {"name": name, "data": DATA, "parameters": {"train.lr": {"loguniform": [3e-4, 1e-2]}}}
    parent = SweepTracker(uri, name).start_sweep(yaml.safe_dump(space), {"trials": len(trials), "algorithm": "random"})
    callbacks = [MlflowTrackingCallback(uri, name, parent, BASE) for _ in range(writers)]
    with ThreadPoolExecutor(writers) as pool, contextlib.redirect_stdout(io.StringIO()):  # MLflow's "View run" lines
        list(pool.map(drive, callbacks, [trials[i::writers] for i in range(writers)]))
    return time.perf_counter() - start


def summarize(uri: str, name: str, storage: Path, profile: Path | None = None) -> tuple[float, float]:
    """Wall seconds and peak memory (MiB, max RSS by GNU time) of `sweeper summarize` as a subprocess; under
    cProfile (its stats into `profile`) when given."""
    peak = storage.parent / "peak_kib"
    command = (
        [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "sweeper.cli"]
        if profile
        else [str(Path(sys.executable).with_name("sweeper"))]
    )
    start = time.perf_counter()
    done = subprocess.run(
        [
            "/usr/bin/time",
            "-f",
            "%M",
            "-o",
            str(peak),
            *command,
            "summarize",
            name,
            "--storage",
            str(storage),
            "--tracking-uri",
            uri,
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
    return wall, int(peak.read_text().split()[-1]) / 1024


def run(n: int, writers: int, folder: Path, profile: Path | None) -> dict[str, float | None]:
    """One size: fill the server in `folder` unless it holds this size's sweep already (then the fill time is None),
    and summarise it; the summary lands in folder/sweeps/scale-<n>/summary."""
    name = f"scale-{n}"
    server = MlflowServer(folder)
    try:
        fill_s = None
        if MlflowClient(server.uri).get_experiment_by_name(name) is None:
            fill_s = fill(server.uri, name, make_trials(n, folder / name), writers)
            shutil.rmtree(folder / name)  # the trials' artifacts folders: the server holds its copies
        summarize_s, peak_mib = summarize(server.uri, name, folder / "sweeps", profile and profile / f"{name}.prof")
    finally:
        server.stop()
    return {"trials": n, "fill_s": fill_s, "summarize_s": summarize_s, "peak_mib": peak_mib}


def seconds(value: float | None) -> str:
    return "(filled before)" if value is None else f"{value:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--writers", type=int, default=4, help="tracking callbacks sending at once (the fill)")
    parser.add_argument(
        "--folder",
        type=Path,
        help="keep the server's store and the summaries here; a later run "
        "with the same folder summarises the sweeps it holds again without filling them",
    )
    parser.add_argument("--profile", type=Path, help="run summarize under cProfile: scale-<N>.prof here")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    rows = []
    for n in args.trials:
        with tempfile.TemporaryDirectory() as tmp:
            rows.append(run(n, args.writers, args.folder or Path(tmp), args.profile))
        print(
            f"{n} trials: fill {seconds(rows[-1]['fill_s'])}, summarize {rows[-1]['summarize_s']:.1f} s, "
            f"peak {rows[-1]['peak_mib']:.0f} MiB",
            flush=True,
        )
    print("\n| trials | fill | summarize (s) | summarize peak memory (MiB) |\n|---|---|---|---|")
    for row in rows:
        print(f"| {row['trials']} | {seconds(row['fill_s'])} | {row['summarize_s']:.1f} | {row['peak_mib']:.0f} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
