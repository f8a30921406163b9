"""What the sweep layer adds per trial, and whether that stays flat as a sweep grows: `sweeper run` against bare
Ray Tune running the same trial work, at each sweep size in one run.

    python benchmarks/sweep_overhead.py [--trials 24 96 384] [--concurrent 2] [--no-system-metrics]
    python benchmarks/sweep_overhead.py --memory 24 96      # what grows in each driver, by owner (tracemalloc)
    python benchmarks/sweep_overhead.py --profile 96         # where our driver's time goes (cProfile, two threads)

The trial work, the same on both sides (issue #43: a trial's own evaluation is trial work): a grid of `--trials`
one-epoch trials of nmt_core on the synthetic corpus (a tiny model), `--concurrent` at a time, workers reused, the
corpus tokenised once per worker; each trial trains, decodes dev with greedy search every epoch and dev and test with
beam search at the end (its BLEU), and checkpoints both of its reports (the training state, `num_to_keep=2`).
Bare Tune does only that, in a trainable of its own that imports no sweeper code. `sweeper run` adds what the sweep
layer is: the YAML, the trial's artifacts (translations, traces), the MLflow models of `tracking.models`
(`--models`; the default, `best`, logs each variant's best trial's model at the end), system metrics, the progress
board, provenance, every MLflow write (a SQLite store created for the run), results.parquet, the best model's
registration and the summary.

Per trial = wall seconds of the whole driver process (Ray's start included) / trials; extra = ours - bare. The
driver is measured inside its own process on both sides: its resident memory each time a trial ends (growth per
trial: the least-squares slope over the trials after the first quarter), its CPU seconds, and each save of Tune's
experiment state (Tune forces one whenever a trial has checkpointed `num_to_keep` times since the last).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml
from ray import tune

from nmt_core.config import TrialConfig, build_config
from nmt_core.data.batches import TrialData, load_trial_data

# imported here, not in bare_trial: a worker loads them once, when it unpickles the trainable, as ours loads
# sweeper.running.trainable once, when its first trial starts (sweeper.running.trial_handoff): each side's workers
# pay for importing torch once. Unlike ours, this side's driver imports torch too (a bare script's usual shape)
from nmt_core.training import checkpoint
from nmt_core.training.train import evaluate_split, train

HERE = Path(__file__).resolve().parent
BASE = {
    "data": {"corpus": "synthetic", "train_subset": 600, "eval_subset": 40},
    "model": {"emb_size": 16, "hidden_size": 32, "dropout": 0.0},
    "train": {"lr": 5e-3, "batch_size": 32, "epochs": 1},
    "decode": {"beam_size": 2},
}
CHECKPOINTS_KEPT = 2  # sweeper/running/runner.py's CheckpointConfig(num_to_keep) outside PBT
OWNERS = (  # who holds a traced allocation: the innermost frame under one of these (tracemalloc's file names)
    ("/sweeper/", "sweeper"),
    ("/ray/tune/", "Ray Tune"),
    ("/ray/train/", "Ray Tune (ray.train's storage context)"),
    ("/ray/", "Ray core"),
    ("/mlflow/", "MLflow"),
    ("/sqlalchemy/", "SQLAlchemy (MLflow's store)"),
    ("/nmt_core/", "nmt_core"),
)


def current_rss_mb() -> float:
    """This process's resident memory now (ru_maxrss only gives the peak)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def owner(traceback: tracemalloc.Traceback) -> str:
    for frame in reversed(traceback):  # innermost first (tracemalloc keeps the most recent call last)
        for part, name in OWNERS:
            if part in frame.filename:
                return name
    return "other (Python, pyarrow, ...)"


@dataclass
class Probe:
    """What a driver process records about itself while Tune runs: written as JSON when it ends."""

    snapshot_at: tuple[int, ...] = ()  # trials ended: tracemalloc snapshots (slows the driver: no timings then)
    start: float = field(default_factory=time.perf_counter)
    ended: list[tuple[int, float]] = field(default_factory=list)  # (trials ended, resident MB)
    began: dict[str, float] = field(default_factory=dict)
    trial_s: list[float] = field(default_factory=list)  # each trial's start to end, as the driver sees it
    worker_s: list[float] = field(default_factory=list)  # ... and in its worker (Tune's time_total_s)
    spans: list[tuple[float, float]] = field(default_factory=list)  # each trial's start and end, since `start`
    first_final: dict[str, Any] = field(default_factory=dict)  # the first trial's last report: what it evaluated
    saves: list[tuple[int, float, int]] = field(default_factory=list)  # Tune's state saves: trials, seconds, bytes
    phases: dict[str, float] = field(default_factory=dict)  # seconds since start when each phase began
    cpu_at_trials_done: float = 0.0
    snapshots: list[tuple[int, Any]] = field(default_factory=list)

    def install(self) -> None:
        """Times every save of Tune's experiment state (the JSON of every trial, rewritten each time)."""
        from ray.tune.execution.tune_controller import TuneController

        save = TuneController.save_to_dir

        def timed_save(controller) -> None:
            began = time.perf_counter()
            save(controller)
            took = time.perf_counter() - began
            state = Path(controller._storage.experiment_driver_staging_path, controller.experiment_state_file_name)
            self.saves.append((len(controller.get_trials()), took, state.stat().st_size))

        TuneController.save_to_dir = timed_save
        if self.snapshot_at:
            tracemalloc.start(25)

    def mark(self, phase: str) -> None:
        self.phases.setdefault(phase, time.perf_counter() - self.start)
        if phase == "trials done":
            self.cpu_at_trials_done = cpu_seconds()

    def trial_started(self, trial_id: str) -> None:
        self.mark("first trial")
        self.began.setdefault(trial_id, time.perf_counter())

    def trial_ended(self, trial) -> None:
        trial_id, result = trial.trial_id, trial.last_result or {}
        self.worker_s.append(result.get("time_total_s", 0.0))
        self.first_final = self.first_final or {"keys": sorted(result), "checkpoint": result.get("checkpoint_dir_name")}
        if trial_id in self.began:
            began = self.began.pop(trial_id)
            self.trial_s.append(time.perf_counter() - began)
            self.spans.append((began - self.start, time.perf_counter() - self.start))
        self.ended.append((len(self.ended) + 1, current_rss_mb()))
        if len(self.ended) in self.snapshot_at:
            self.snapshots.append((len(self.ended), tracemalloc.take_snapshot()))

    def write(self, path: str, **extra: Any) -> None:
        kept = [f.name for f in fields(self) if f.name not in ("snapshots", "began", "snapshot_at")]
        record = {name: getattr(self, name) for name in kept}  # not asdict: it would deep-copy the snapshots
        record.update(extra, growth=self.growth(), cpu_s=cpu_seconds(), peak_rss_mb=peak_rss_mb())
        Path(path).write_text(json.dumps(record))

    def growth(self) -> dict[str, Any]:
        """What the driver's traced Python objects grew by per trial between the first and the last snapshot, by
        owner, and the largest allocation sites."""
        if len(self.snapshots) < 2:
            return {}
        (first, old), (last, new) = self.snapshots[0], self.snapshots[-1]
        stats = new.compare_to(old, "traceback")
        by_owner: dict[str, float] = {}
        for stat in stats:
            by_owner[owner(stat.traceback)] = by_owner.get(owner(stat.traceback), 0) + stat.size_diff
        sites = [
            {
                "kb_per_trial": stat.size_diff / 1024 / (last - first),
                "owner": owner(stat.traceback),
                "frames": [f"{f.filename}:{f.lineno}" for f in list(stat.traceback)[-14:]],
            }
            for stat in stats[:8]
        ]
        per_trial = {name: size / 1024 / (last - first) for name, size in by_owner.items()}
        return {"from": first, "to": last, "kb_per_trial": per_trial, "sites": sites}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bare_trial(config: dict[str, Any], base: dict[str, Any]) -> None:
    """nmt_core's trial work as a plain Tune function trainable: train (greedy dev BLEU every epoch, beam test BLEU
    at the end), beam dev BLEU, a checkpoint with each report; the corpus tokenised once per reused worker."""
    cfg = build_config({**base, "train": {**base["train"], "seed": config["seed"]}})
    latest: dict[str, Any] = {}

    def report(metrics: dict[str, Any], state: dict[str, Any]) -> None:
        with tempfile.TemporaryDirectory() as folder:
            checkpoint.save(state, Path(folder) / checkpoint.LAST)
            tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(folder))

    def on_epoch_end(metrics: dict[str, Any], state: dict[str, Any], is_best: bool) -> None:
        latest["state"] = state
        report(metrics, state)

    result = train(cfg, on_epoch_end, log=lambda line: None, data=worker_data(cfg))
    device = next(result.model.parameters()).device
    dev = evaluate_split(result.model, result.data, "dev", cfg, device, cfg.decode.beam_size)
    best = next(row for row in result.history if row["epoch"] == result.final["best_epoch"])
    final = {**best, **result.final, "epoch": result.history[-1]["epoch"], "bleu_dev_final_beam": dev.bleu}
    report(final, latest["state"])  # the best epoch's report, as searchers and schedulers read the last result


WORKER_DATA: dict[str, TrialData] = {}


def worker_data(cfg: TrialConfig) -> TrialData:
    """The tokenised corpus, once per worker process (as sweeper/running/trainable.py's trial_data)."""
    key = repr(cfg.data)
    if key not in WORKER_DATA:
        WORKER_DATA.clear()
        WORKER_DATA[key] = load_trial_data(cfg.data, eval_max_len=cfg.decode.max_src_len, log=lambda line: None)
    return WORKER_DATA[key]


def bare_driver(out: str, trials: int, concurrent: int, storage: str, snapshot_at: tuple[int, ...]) -> None:
    """Bare Ray Tune on the same resources and checkpoint settings as `sweeper run`, measured the same way."""
    import ray
    from ray import cloudpickle

    probe = Probe(snapshot_at)
    probe.install()

    class Observer(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            probe.trial_started(trial.trial_id)

        def on_trial_complete(self, iteration, trials, trial, **info):
            probe.trial_ended(trial)

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this file
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
    tuner = tune.Tuner(
        tune.with_resources(tune.with_parameters(bare_trial, base=BASE), {"cpu": 1}),
        param_space={"seed": tune.grid_search(list(range(1, trials + 1)))},
        tune_config=tune.TuneConfig(metric="bleu_dev", mode="max", max_concurrent_trials=concurrent, reuse_actors=True),
        run_config=tune.RunConfig(
            storage_path=storage,
            verbose=0,
            callbacks=[Observer()],
            checkpoint_config=tune.CheckpointConfig(num_to_keep=CHECKPOINTS_KEPT),
        ),
    )
    grid = tuner.fit()
    probe.mark("trials done")
    errors = sum(result.error is not None for result in grid)
    probe.mark("end")
    probe.write(out, errors=errors)


def ours_driver(out: str, snapshot_at: tuple[int, ...], profile: str) -> None:
    """`sweeper run space.yaml` in this process, with the probe, each MLflow write timed (its delay from the epoch's
    arrival at the driver, and the sender thread's busy seconds by kind) and the phases after the trials."""
    from sweeper.cli import main
    from sweeper.running import runner
    from sweeper.tracking import runs as tracking

    probe, callback = Probe(snapshot_at), tracking.MlflowTrackingCallback
    probe.install()
    delays: list[float] = []
    sending: dict[str, float] = {}
    profiles = {"driver": cProfile.Profile(), "sender": cProfile.Profile()} if profile else {}
    start, complete, send, deliver = (
        callback.on_trial_start,
        callback.on_trial_complete,
        callback._send,
        callback._deliver,
    )
    finish, rows, summary = runner.finish, runner.result_rows, runner.write_summary

    def on_start(self, iteration, trials, trial, **info):
        probe.trial_started(trial.trial_id)
        start(self, iteration, trials, trial, **info)

    def on_complete(self, iteration, trials, trial, **info):
        complete(self, iteration, trials, trial, **info)
        probe.trial_ended(trial)

    def timed_send(self, write):
        began = time.perf_counter()
        send(self, write)
        sending[write["kind"]] = sending.get(write["kind"], 0.0) + time.perf_counter() - began
        if write["kind"] == "metrics" and write["epoch"]:  # timestamp: when the driver received the epoch
            delays.append(time.time() - write["timestamp"] / 1000)

    def profiled_deliver(self, write):  # cProfile follows one thread: the sender's gets a profile of its own
        with profiles["sender"]:
            deliver(self, write)

    def marked(phase, function):
        def call(*args, **kwargs):
            probe.mark(phase)
            return function(*args, **kwargs)

        return call

    callback.on_trial_start, callback.on_trial_complete, callback._send = on_start, on_complete, timed_send
    if profile:
        callback._deliver = profiled_deliver
    runner.finish, runner.result_rows = marked("trials done", finish), marked("results", rows)
    runner.write_summary = marked("summary", summary)
    with profiles.get("driver") or contextlib.nullcontext():
        code = main(["run", "space.yaml"])
    probe.mark("end")
    for name, profiler in profiles.items():
        profiler.dump_stats(f"{profile}.{name}")
    probe.write(out, errors=int(code != 0), delays=delays, sending=sending)
    sys.exit(code)


def space(trials: int, concurrent: int, system_metrics: bool, models: str | None) -> dict[str, Any]:
    """The sweep YAML: the bare trials' work, one seed per trial."""
    tracking = {"system_metrics": system_metrics, **({"models": models} if models else {})}
    return {
        "name": "overhead",
        "base": {k: v for k, v in BASE.items() if k != "data"},
        "data": BASE["data"],
        "parameters": {"train.seed": {"grid": list(range(1, trials + 1))}},
        "search": {"max_concurrent": concurrent},
        "tracking": tracking,
    }


def drive(folder: Path, call: str, code: str = "") -> tuple[float, dict[str, Any]]:
    """Run one driver process in `folder`: its wall seconds (interpreter start included) and its record. `code`: a
    checkout whose sweeper and nmt_core the driver and its Ray workers import instead of this one's."""
    folder.mkdir(parents=True, exist_ok=True)
    script = f"import sys; sys.path.insert(0, {str(HERE)!r}); import sweep_overhead as b; b.{call}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [code, os.environ.get("PYTHONPATH")]))}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=folder, capture_output=True, text=True, check=False, env=env
    )
    wall = time.perf_counter() - start
    record = folder / "driver.json"
    if done.returncode != 0 or not record.exists():
        raise SystemExit(
            f"{call.split('(')[0]} failed (exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        )
    return wall, json.loads(record.read_text())


def ours(
    trials: int, concurrent: int, folder: Path, system_metrics=True, models=None, snapshot_at=(), profile="", code=""
):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "space.yaml").write_text(yaml.safe_dump(space(trials, concurrent, system_metrics, models)))
    return drive(folder, f"ours_driver('driver.json', {tuple(snapshot_at)!r}, {profile!r})", code)


def bare(trials: int, concurrent: int, folder: Path, snapshot_at=()):
    return drive(
        folder, f"bare_driver('driver.json', {trials}, {concurrent}, {str(folder / 'tune')!r}, {tuple(snapshot_at)!r})"
    )


@dataclass
class Size:
    """One sweep size measured on both sides: wall seconds and each driver's record."""

    trials: int
    bare_wall: float
    bare: dict[str, Any]
    ours_wall: float
    ours: dict[str, Any]
    label: str = ""  # "before": the sweeper of --before's checkout

    def per_trial(self) -> tuple[float, float]:
        return self.bare_wall / self.trials, self.ours_wall / self.trials

    def name(self) -> str:
        return f"{self.trials} {self.label}".strip()

    def extra(self) -> float:
        bare, ours = self.per_trial()
        return ours - bare


def rss_slope_kb(ended: list[tuple[int, float]]) -> float:
    """KB of resident memory per trial ended: least squares over the trials after the first quarter (warm-up)."""
    points = [(n, mb) for n, mb in ended if n > len(ended) // 4]
    if len(points) < 2:
        return float("nan")
    mean_n, mean_mb = statistics.fmean(n for n, _ in points), statistics.fmean(mb for _, mb in points)
    spread = sum((n - mean_n) ** 2 for n, _ in points)
    return 1024 * sum((n - mean_n) * (mb - mean_mb) for n, mb in points) / spread


def phase(record: dict[str, Any], begin: str, end: str) -> float:
    return record["phases"].get(end, 0.0) - record["phases"].get(begin, 0.0)


def time_row(size: Size) -> str:
    (bare, ours), n, sides = size.per_trial(), size.trials, (size.bare, size.ours)
    trial_s = " / ".join(f"{statistics.fmean(r['worker_s']):.2f} ({statistics.fmean(r['trial_s']):.2f})" for r in sides)
    trials_phase = [phase(r, "first trial", "trials done") for r in sides]
    fixed = [size.bare_wall - trials_phase[0], size.ours_wall - trials_phase[1]]
    return (
        f"| {size.name()} | {bare:.2f} | {ours:.2f} | **{size.extra():+.2f}** | {ours / bare:.2f}x | "
        f"{trials_phase[0] / n:.2f} / {trials_phase[1] / n:.2f} | {trial_s} | {fixed[0]:.0f} / {fixed[1]:.0f} | "
        f"{phase(size.ours, 'results', 'summary'):.1f} / {phase(size.ours, 'summary', 'end'):.1f} |"
    )


def saves(record: dict[str, Any], trials: int) -> str:
    """Tune's experiment-state saves: how many, their seconds in all, and the last one's size per trial."""
    count, seconds = len(record["saves"]), sum(took for _, took, _ in record["saves"])
    last = record["saves"][-1][2] / 1024 / trials if record["saves"] else 0.0
    return f"{count}, {seconds:.1f} s, {last:.1f} KB"


def driver_row(size: Size) -> str:
    n, b, o = size.trials, size.bare, size.ours
    delays = o.get("delays") or [0.0]
    return (
        f"| {size.name()} | {b['ended'][-1][1]:.0f} / {o['ended'][-1][1]:.0f} | {rss_slope_kb(b['ended']):.0f} / "
        f"{rss_slope_kb(o['ended']):.0f} | {b['cpu_at_trials_done'] / n:.2f} / {o['cpu_at_trials_done'] / n:.2f} | "
        f"{sum(o.get('sending', {}).values()) / n:.2f} | {saves(b, n)} / {saves(o, n)} | "
        f"{statistics.median(delays):.2f} / {max(delays):.2f} |"
    )


TIME_HEADER = (
    "| trials | bare Tune s/trial | ours s/trial | extra s/trial | ours / bare | trials' phase s/trial, bare / ours "
    "| one trial's s in its worker (seen by the driver), bare / ours | fixed s (start + end), bare / ours "
    "| ours: results / summary s |\n"
    "|---|---|---|---|---|---|---|---|---|"
)
DRIVER_HEADER = (
    "| trials | driver RSS MB when trials done, bare / ours | RSS growth KB/trial, bare / ours "
    "| driver CPU s/trial, bare / ours | MLflow sender busy s/trial "
    "| Tune's experiment-state saves: count, s in all, KB/trial (bare / ours) "
    "| epoch -> MLflow s, median / longest |\n"
    "|---|---|---|---|---|---|---|"
)


def verdict(sizes: list[Size]) -> list[str]:
    """Within 1.5x of bare Tune per trial at every size, and the extra cost per trial between sizes (the marginal
    trial's: fixed costs cancel), which is flat when it does not exceed the smallest size's average extra."""
    ratios = [s.per_trial()[1] / s.per_trial()[0] for s in sizes]
    lines = [
        f"within 1.5x of bare Tune per trial: {'yes' if max(ratios) <= 1.5 else 'no'} "
        f"({', '.join(f'{s.trials}: {r:.2f}x' for s, r in zip(sizes, ratios))})"
    ]
    for a, b in zip(sizes, sizes[1:]):
        marginal = ((b.ours_wall - b.bare_wall) - (a.ours_wall - a.bare_wall)) / (b.trials - a.trials)
        flat = "flat" if marginal <= max(a.extra(), 0) else "grows"
        lines.append(
            f"extra per trial from {a.trials} to {b.trials} trials: the marginal trial's {marginal:+.2f} s "
            f"vs {a.extra():+.2f} s average at {a.trials} ({flat})"
        )
    return lines


def print_growth(side: str, record: dict[str, Any]) -> None:
    growth = record["growth"]
    if not growth:
        print(f"{side}: fewer than two snapshots taken")
        return
    owners = sorted(growth["kb_per_trial"].items(), key=lambda item: -item[1])
    print(f"\n{side}: traced Python memory grown per trial from {growth['from']} to {growth['to']} trials ended:")
    print(", ".join(f"{name} {kb:+.1f} KB" for name, kb in owners) + f"; in all {sum(k for _, k in owners):+.1f} KB")
    for site in growth["sites"]:
        print(f"  {site['kb_per_trial']:+.1f} KB/trial ({site['owner']}):")
        print("\n".join(f"      {frame}" for frame in site["frames"]))


def print_profile(path: str, title: str, limit: int = 25) -> None:
    """The functions of sweeper, Ray Tune and MLflow with the most cumulative time in one thread."""
    print(f"\n{title} (cProfile; cumulative s, own s, calls):")
    stats = pstats.Stats(path)
    rows = [
        (cumulative, own, calls, f"{Path(file).parent.name}/{Path(file).name}:{line} {name}")
        for (file, line, name), (_, calls, own, cumulative, _) in stats.stats.items()
        if any(part in file for part in ("/sweeper/", "/ray/tune/", "/mlflow/", "/ray/_private/worker"))
    ]
    for cumulative, own, calls, where in sorted(rows, reverse=True)[:limit]:
        print(f"  {cumulative:8.2f} {own:8.2f} {calls:8d}  {where}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, nargs="+", default=[24], help="sweep sizes, each measured in turn")
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--no-system-metrics", action="store_true", help="tracking.system_metrics: false (its cost)")
    parser.add_argument("--models", choices=("best", "all", "none"), help="tracking.models (default: the sweeper's)")
    parser.add_argument("--memory", type=int, nargs="+", metavar="N", help="trace both drivers' memory instead")
    parser.add_argument("--profile", type=int, metavar="N", help="profile our driver in a sweep of N trials instead")
    parser.add_argument("--json", type=Path, help="also write every driver's record here")
    parser.add_argument(
        "--before", metavar="CHECKOUT", help="also time the sweeper of this checkout at each size (a before/after run)"
    )
    args = parser.parse_args(argv)
    system_metrics = not args.no_system_metrics
    with tempfile.TemporaryDirectory() as tmp:
        if args.memory:
            at = tuple(sorted(args.memory))
            print_growth("bare Tune's driver", bare(at[-1], args.concurrent, Path(tmp, "bare"), at)[1])
            print_growth(
                "our driver", ours(at[-1], args.concurrent, Path(tmp, "ours"), system_metrics, args.models, at)[1]
            )
            return 0
        if args.profile:
            ours(args.profile, args.concurrent, Path(tmp), system_metrics, args.models, profile=str(Path(tmp, "prof")))
            print_profile(str(Path(tmp, "prof.driver")), "our driver's main thread (Tune's loop and callbacks)")
            print_profile(str(Path(tmp, "prof.sender")), "our driver's MLflow sender thread")
            return 0
        sizes = measure(args, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps([asdict(size) for size in sizes]))
    return 0


def measure(args: argparse.Namespace, folder: Path) -> list[Size]:
    """Each size in turn: bare Tune, then ours (and --before's, between them); the tables once all are done."""
    models, system_metrics = args.models, not args.no_system_metrics
    print(f"{args.concurrent} trials at a time; tracking.models: {models or 'the default'}")
    sizes = []
    for trials in args.trials:
        bare_run = bare(trials, args.concurrent, folder / f"bare{trials}")
        if args.before:
            before = ours(trials, args.concurrent, folder / f"before{trials}", system_metrics, models, code=args.before)
            sizes.append(Size(trials, *bare_run, *before, label="before"))
        sizes.append(
            Size(trials, *bare_run, *ours(trials, args.concurrent, folder / f"ours{trials}", system_metrics, models))
        )
        print(f"measured {trials} trials", flush=True)
    print("\n" + TIME_HEADER)
    print("\n".join(time_row(size) for size in sizes))
    print("\n" + DRIVER_HEADER)
    print("\n".join(driver_row(size) for size in sizes))
    print("\n" + "\n".join(verdict([size for size in sizes if not size.label])), flush=True)
    return sizes


if __name__ == "__main__":
    raise SystemExit(main())
