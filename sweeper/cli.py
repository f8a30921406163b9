"""`sweeper validate | run | resume | submit | summarize`."""
from __future__ import annotations

import argparse
import sys

from nmt_core.config import ConfigError, parse_overrides
from nmt_core.corpora import CorpusError

RESUME_HELP = """finish an interrupted sweep: trials that finished are kept and not re-run, unfinished and
failed ones continue from their last checkpoint. Limits (Ray Tune's): the search space cannot change on
resume, and ASHA's rung state is lost, so a resumed ASHA sweep may let a trial run past a rung it would
have been stopped at."""


def cmd_validate(args: argparse.Namespace) -> int:
    from sweeper.space import conditional_summary, count_grid, grid_product_size, load_spec, plan_trials

    spec = load_spec(args.space, parse_overrides(args.set, "--set"))
    print(f"{args.space}: valid sweep {spec.name!r}")
    print(f"  algorithm {spec.search.algorithm}, scheduler {spec.scheduler.type}, objective {spec.mode} {spec.metric}")
    print(f"  resources per trial: {spec.cpu:g} CPU, {spec.gpu:g} GPU; retries {spec.max_retries}")
    for p in spec.parameters:
        print(f"  {p.key}: {p.kind} {p.values}" + (f"  if {p.condition}" if p.condition else ""))
    if spec.search.algorithm == "optuna":
        print(f"  plan: {spec.search.num_samples} trials suggested by Optuna TPE "
              f"(at most {spec.search.max_concurrent} at once); conditionals are suggested only when active")
    else:
        plans = plan_trials(spec)
        grid = count_grid(spec)
        print(f"  plan: {len(plans)} trials = {grid} configurations x {spec.search.num_samples} samples "
              f"x {spec.search.repeats} seeds (grid without conditionals: {grid_product_size(spec)})")
        for line in conditional_summary(spec):
            print(f"  conditional: {line}")
        variants: dict[str, int] = {}
        for plan in plans:
            variants[plan.variant] = variants.get(plan.variant, 0) + 1
        print("  variants: " + ", ".join(f"{v} x{n}" for v, n in variants.items()))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from sweeper.runner import run_sweep
    from sweeper.space import load_spec

    spec = load_spec(args.space, parse_overrides(args.set, "--set"))
    if args.name:
        spec.name = args.name
    return run_sweep(spec, args.storage, args.tracking_uri, args.address)


def cmd_resume(args: argparse.Namespace) -> int:
    from sweeper.runner import resume_sweep

    return resume_sweep(args.name, args.storage, args.address)


def cmd_submit(args: argparse.Namespace) -> int:
    from sweeper.space import load_spec
    from sweeper.storage import open_storage
    from sweeper.submit import submit

    spec = load_spec(args.space, parse_overrides(args.set, "--set"))
    open_storage(args.storage, "sweeper submit")  # the scheme is checked here; the cluster opens it
    if args.name:
        spec.name = args.name
    return submit(spec, args.address, args.storage, args.tracking_uri, args.wait, ship_code=not args.no_code)


def cmd_summarize(args: argparse.Namespace) -> int:
    from sweeper.space import SignificanceSpec

    if args.resamples is not None:  # bad input is refused before anything is read, written or imported
        SignificanceSpec(resamples=args.resamples).check("sweeper summarize --resamples")
    import json
    import tempfile
    from pathlib import Path

    from sweeper.runner import DEFAULT_TRACKING, STATE_FILE, SUMMARY_DIR
    from sweeper.storage import open_storage
    from sweeper.summary import SummaryError, render_markdown, summarize
    from sweeper.tracking import check_reachable, resolve_uri

    experiment = open_storage(args.storage, "sweeper summarize").below(args.name)
    has_state = experiment.exists(STATE_FILE)
    uri = args.tracking_uri or (json.loads(experiment.read_text(STATE_FILE))["tracking_uri"] if has_state
                                else DEFAULT_TRACKING)
    uri = resolve_uri(uri)
    check_reachable(uri)
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():  # never create one
        raise ConfigError("NAME", f"no sweep named {args.name!r}: no {experiment.display(STATE_FILE)} and no tracking "
                          f"store {uri.removeprefix('sqlite:///')} (pass the --storage or --tracking-uri the sweep ran "
                          "with)", "sweeper summarize")
    with tempfile.TemporaryDirectory() as staging:
        out = Path(args.out) if args.out else Path(staging)  # by default into storage, beside results.parquet
        try:
            summary = summarize(args.name, uri, out, [args.format], args.resamples, run_id=args.run_id)
        except SummaryError as err:
            print(f"sweeper: {err}", file=sys.stderr)
            return 1
        if not args.out:
            experiment.upload(out, SUMMARY_DIR)
    print(render_markdown(summary))
    print(f"written to {args.out or experiment.display(SUMMARY_DIR)}/ (summary.md"
          f"{', bleu_table.csv' if args.format == 'csv' else ''}{', bleu_table.tex' if args.format == 'latex' else ''}"
          ", figures) and logged to the sweep's MLflow run")
    return 0


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("space", help="sweep YAML (see search_spaces/)")
    p.add_argument("--name", help="sweep name (default: the YAML's name); the MLflow experiment and Ray run name")
    p.add_argument("--storage", default="./sweeps", help="where Ray keeps trials and results.parquet (default %(default)s)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: the YAML's tracking.uri, else sqlite:///mlflow.db)")
    p.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray for this run)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a dotted YAML key, e.g. --set base.train.epochs=1")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sweeper", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="check a sweep YAML and print the plan: trials, resources, conditionals")
    p.add_argument("space")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("run", help="run a sweep on a local Ray (or --address) and track it in MLflow")
    add_run_options(p)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("submit", help="run a sweep on a Ray cluster as a Ray Job")
    add_run_options(p)
    p.set_defaults(storage="~/sweeps")
    p.add_argument("--wait", action="store_true", help="stream the job's log and exit with its result")
    p.add_argument("--no-code", action="store_true",
                   help="use the nmt-sweeper installed on the cluster instead of shipping this checkout's code")
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("resume", help="finish an interrupted sweep", description=RESUME_HELP)
    p.add_argument("name")
    p.add_argument("--storage", default="./sweeps")
    p.add_argument("--address")
    p.set_defaults(func=cmd_resume)
    p = sub.add_parser("summarize", help="the papers' tables and figures from a finished sweep (read from MLflow)")
    p.add_argument("name")
    p.add_argument("--tracking-uri", help="default: the one the sweep ran with (from --storage), else sqlite:///mlflow.db")
    p.add_argument("--storage", default="./sweeps")
    p.add_argument("--format", choices=["md", "csv", "latex"], default="md",
                   help="summary.md is always written; csv or latex adds the BLEU table in that format")
    p.add_argument("--out", help="output folder (default: STORAGE/NAME/summary)")
    p.add_argument("--run-id", help="the sweep's MLflow parent run (default: the newest sweep of that name)")
    p.add_argument("--resamples", type=int, help="paired-bootstrap resamples, >= 100 (default: the space's "
                   "significance.resamples, else 1000)")
    p.set_defaults(func=cmd_summarize)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, CorpusError) as err:  # bad input, an unusable corpus or tracking store
        print(f"sweeper: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
