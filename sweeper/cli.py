# PYTHON_ARGCOMPLETE_OK
"""`sweeper validate | run | resume | submit | summarize | schema`: each subcommand parses its arguments and calls
the function of the same name in sweeper/api.py, which checks them (the gate) and does the work.

A new subcommand: a `cmd_NAME` here that calls `api.NAME(...)` and prints, a parser in `build_parser`, and in the
API a function that starts with `check_arguments("sweeper NAME", name=..., storage=..., ...)` inside `one_error()`.
"""

from __future__ import annotations

import argparse
import sys

from nmt_core.cli_common import GateParser, add_version, enable_completion
from nmt_core.config import parse_overrides
from nmt_core.gate import clip_path, escape, one_line
from sweeper import api

RESUME_HELP = """finish an interrupted sweep: trials that finished are kept and not re-run, unfinished and
failed ones continue from their last checkpoint. Limits (Ray Tune's): the search space cannot change on
resume, and ASHA's rung state is lost, so a resumed ASHA sweep may let a trial run past a rung it would
have been stopped at."""
VERBOSE_HELP = (
    "also show Ray's output (its banners, checkpoint lines, every trial's per-epoch lines); by default "
    "it goes to STORAGE/NAME/sweep.log only"
)

RUN_EXAMPLE = """example:
  sweeper run search_spaces/quickstart.yaml --set base.train.epochs=1 --set search.repeats=1
  mlflow ui --backend-store-uri sqlite:///mlflow.db    # the runs it tracked

Tracking URI: --tracking-uri, else $MLFLOW_TRACKING_URI, else the space's tracking.uri, else sqlite:///mlflow.db.
Ray: --address, else $RAY_ADDRESS, else a local Ray for this run."""
SET_HELP = "override a dotted YAML key, e.g. --set base.train.epochs=1 (repeatable)"
TRACKING_RECORDED_HELP = (
    "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the one the sweep ran with, "
    "from --storage, else sqlite:///mlflow.db)"
)


def cmd_validate(args: argparse.Namespace) -> int:
    for line in api.validate(args.space, overrides=overrides(args)).lines:
        print(escape(line))
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    return api.run(
        args.space,
        overrides=overrides(args),
        name=args.name,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        address=args.address,
        verbose=args.verbose,
    ).exit_code


def cmd_resume(args: argparse.Namespace) -> int:
    return api.resume(
        args.name, storage=args.storage, tracking_uri=args.tracking_uri, address=args.address, verbose=args.verbose
    ).exit_code


def cmd_submit(args: argparse.Namespace) -> int:
    return api.submit(
        args.space,
        overrides=overrides(args),
        name=args.name,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        address=args.address,
        wait=args.wait,
        ship_code=not args.no_code,
    )


def cmd_summarize(args: argparse.Namespace) -> int:
    done = api.summarize(
        args.name,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        out=args.out,
        format=args.format,
        resamples=args.resamples,
        run_id=args.run_id,
    )
    print(done.markdown)
    print(
        f"written to {clip_path(done.folder)}/ (summary.md"
        f"{', bleu_table.csv' if args.format == 'csv' else ''}{', bleu_table.tex' if args.format == 'latex' else ''}"
        ", figures) and logged to the sweep's MLflow run"
    )
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    for path in api.schema(args.out):
        print(clip_path(path))
    return 0


def overrides(args: argparse.Namespace) -> dict:
    """--set KEY=VALUE pairs, parsed as YAML scalars (the API checks them as it checks a dict's)."""
    with api.one_error():
        return dict(parse_overrides(args.set, "--set"))


def add_run_options(p: argparse.ArgumentParser, address_help: str) -> None:
    p.add_argument("space", help="sweep YAML (see search_spaces/)")
    p.add_argument("--name", help="sweep name (default: the YAML's name); the MLflow experiment and Ray run name")
    p.add_argument(
        "--storage", default="./sweeps", help="where Ray keeps trials and results.parquet (default %(default)s)"
    )
    p.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the YAML's "
        "tracking.uri, else sqlite:///mlflow.db)",
    )
    p.add_argument("--address", help=address_help)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def build_parser() -> argparse.ArgumentParser:
    parser = GateParser(prog="sweeper", description=__doc__)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, help="what to do (each has its own --help)")
    p = sub.add_parser("validate", help="check a sweep YAML and print the plan: trials, resources, conditionals")
    p.add_argument("space", help="sweep YAML (see search_spaces/)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser(
        "run",
        help="run a sweep on a local Ray (or --address) and track it in MLflow",
        epilog=RUN_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(p, "Ray cluster address (default: $RAY_ADDRESS, else a local Ray for this run)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("submit", help="run a sweep on a Ray cluster as a Ray Job")
    add_run_options(p, "the Ray cluster's dashboard, e.g. http://HEAD:8265 (default: $RAY_ADDRESS)")
    p.set_defaults(storage="~/sweeps")
    p.add_argument("--wait", action="store_true", help="stream the job's log and exit with its result")
    p.add_argument(
        "--no-code",
        action="store_true",
        help="use the nmt-sweeper installed on the cluster instead of shipping this checkout's code",
    )
    p.set_defaults(func=cmd_submit)
    p = sub.add_parser("resume", help="finish an interrupted sweep", description=RESUME_HELP)
    p.add_argument("name", help="the sweep's name (its folder under --storage)")
    p.add_argument("--storage", default="./sweeps", help="where the sweep ran (default %(default)s)")
    p.add_argument("--tracking-uri", help=TRACKING_RECORDED_HELP + "; it must hold the sweep's parent run")
    p.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    p.set_defaults(func=cmd_resume)
    p = sub.add_parser("summarize", help="the papers' tables and figures from a finished sweep (read from MLflow)")
    p.add_argument("name", help="the sweep's name (its MLflow experiment)")
    p.add_argument("--tracking-uri", help=TRACKING_RECORDED_HELP)
    p.add_argument(
        "--storage", default="./sweeps", help="where the sweep ran; its summary goes there (default %(default)s)"
    )
    p.add_argument(
        "--format",
        choices=["md", "csv", "latex"],
        default="md",
        help="summary.md is always written; csv or latex adds the BLEU table in that format",
    )
    p.add_argument("--out", help="output folder (default: STORAGE/NAME/summary)")
    p.add_argument("--run-id", help="the sweep's MLflow parent run (default: the newest sweep of that name)")
    p.add_argument(
        "--resamples",
        type=int,
        help="paired-bootstrap resamples or approximate-randomization shuffles, "
        ">= 100 (default: the space's significance.resamples, else 1000)",
    )
    p.set_defaults(func=cmd_summarize)
    p = sub.add_parser("schema", help="write the JSON Schemas of the sweep YAML and the trial config, for editors")
    p.add_argument("--out", help="folder (default: the package's sweeper/schemas/, which search_spaces/ points to)")
    p.set_defaults(func=cmd_schema)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, call the API function of the subcommand (`args.func`), and print its one-line error if it refuses:
    every check lives in the API (sweeper/api.py check_arguments), and every line passes the gate out."""
    parser = build_parser()
    enable_completion(parser)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except api.SweeperError as err:  # bad input (exit 2), a summary with no finished trial yet (exit 1)
        print(f"sweeper: error: {one_line(err)}", file=sys.stderr)
        return err.exit_code


if __name__ == "__main__":
    sys.exit(main())
