# PYTHON_ARGCOMPLETE_OK
"""`sweeper validate | run | resume | extend | restore | submit | summarize | schema | list | status | stop | logs |
promote`:
each subcommand parses its arguments and calls its function in sweeper/api.py (list: sweep_infos, status: sweep_status,
stop: stop_sweep, logs: sweep_logs; the others by their own name), which checks them (the gate) and does the work.

A new subcommand: a `cmd_NAME` here that calls `api.NAME(...)` and prints, its parser in an `add_NAME(sub)` that
`build_parser` lists, and in the API a function that starts with `check_arguments("sweeper NAME", name=...,
storage=..., ...)` inside `one_error()`.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from nmt_core.config import parse_overrides
from nmt_core.gates.cli_common import GateParser, add_version, main_of
from nmt_core.gates.faults import report, traceback_text
from nmt_core.gates.gate import clip_path, escape, one_line, printable
from nmt_core.gates.settings import help_lines
from nmt_core.gates.streams import say
from sweeper import api
from sweeper.space.spec import SPEC_SETTINGS

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
WITH_HELP = (
    "another sweep in the same tracking store whose trials join this one's (a control row run afterwards), "
    "at its newest run or at RUN_ID; refused unless they differ only in what this sweep varies and what the new "
    "row alone has; repeatable"
)
CHOOSE_HELP = (
    "a setting chosen per row on the space's objective, dev BLEU by default (e.g. train.lr, run at several "
    "values by a grid or by sweeps joined with --with): each row keeps the trials at the value with its seeds' "
    "best mean objective, the others are left out, and rows are compared at their own chosen values; repeatable"
)
TRACKING_RECORDED_HELP = (
    "MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the one the sweep ran with, "
    "from --storage, else sqlite:///mlflow.db)"
)


def cmd_validate(args: argparse.Namespace) -> int:
    for line in api.validate(args.space, overrides=overrides(args)).lines:
        print(escape(line))
    return 0


def sweep_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """What `run` and `submit` both pass to the API: the --set overrides, the name, where it stores and tracks."""
    return dict(
        overrides=overrides(args),
        name=args.name,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        address=args.address,
    )


def cmd_run(args: argparse.Namespace) -> int:
    return api.run(args.space, **sweep_arguments(args), verbose=args.verbose).exit_code


def stored_sweep_arguments(args: argparse.Namespace) -> dict[str, Any]:
    """What `resume` and `extend` both pass to the API (stored_sweep_options' flags): where the sweep is stored and
    tracked, the cluster, and whether Ray's own lines are shown."""
    return dict(storage=args.storage, tracking_uri=args.tracking_uri, address=args.address, verbose=args.verbose)


def cmd_resume(args: argparse.Namespace) -> int:
    return api.resume(args.name, **stored_sweep_arguments(args), budget=args.budget).exit_code


def cmd_extend(args: argparse.Namespace) -> int:
    done = api.extend(
        args.name, until_decided=args.until_decided, **stored_sweep_arguments(args), job=args.job, wait=args.wait
    )
    return done if isinstance(done, int) else done.exit_code


def cmd_restore(args: argparse.Namespace) -> int:
    restored = api.restore(
        args.space, from_data=args.from_data, storage=args.storage, tracking_uri=args.tracking_uri, verbose=args.verbose
    )
    return restored.exit_code


def cmd_submit(args: argparse.Namespace) -> int:
    return api.submit(args.space, **sweep_arguments(args), wait=args.wait, ship_code=not args.no_code)


def budget_hours(text: str) -> float | str:
    """--budget's value: a number where it reads as one (the API's check then holds it to resources.budget's bound),
    else the text, which that check refuses in one line."""
    try:
        return float(text)
    except ValueError:
        return text


def positive_bleu(text: str) -> float:
    """--plan's value: a difference in BLEU points, finite and > 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a difference in BLEU points > 0 (got {one_line(text)})")
    return value


def cmd_summarize(args: argparse.Namespace) -> int:
    from sweeper.summary import planning_lines

    if args.from_data:
        done = api.summarize_from_data(
            args.name, args.from_data, out=args.out, format=args.format, resamples=args.resamples
        )
        print(printable(done.markdown + "\n".join(["", *planning_lines(done.summary, args.plan)] if args.plan else [])))
        print(f"recomputed from {clip_path(args.from_data)} into {clip_path(done.folder)}/")
        return 0
    done = api.summarize(
        args.name,
        storage=args.storage,
        tracking_uri=args.tracking_uri,
        out=args.out,
        format=args.format,
        resamples=args.resamples,
        run_id=args.run_id,
        added=tuple(args.added),
        chosen=tuple(args.chosen),
    )
    print(printable(done.markdown + "\n".join(["", *planning_lines(done.summary, args.plan)] if args.plan else [])))
    print(
        f"written to {clip_path(done.folder)}/ (summary.md"
        f"{', bleu_table.csv' if args.format == 'csv' else ''}{', bleu_table.tex' if args.format == 'latex' else ''}"
        ", figures) and logged to the sweep's MLflow run"
    )
    return 0


BY_NAME_EXAMPLE = """example:
  sweeper {command} quickstart{extra}                       # a sweep run here, in ./sweeps
  sweeper {command} lab-sact --storage s3://bucket/sweeps --address http://HEAD:8265{extra}   # a submitted one

A submitted sweep records its Ray job in its storage: its name (and --storage) is enough; --address (else
$RAY_ADDRESS) asks the cluster too, and finds a submitted sweep whose storage this machine does not read."""
LIST_EXAMPLE = """example:
  sweeper list                                         # the sweeps in ./sweeps
  sweeper list --storage s3://bucket/sweeps --address http://HEAD:8265 --json

States: starting, running, waiting for resources (no trial runs: the cluster has no room for one), stopping,
stopped (`sweeper resume NAME` continues it), finished, failed."""
PROMOTE_EXAMPLE = """example:
  sweeper promote quickstart 8f3a1_00004    # the trial ids are in results.parquet and the MLflow runs' names

With tracking.models: best (the default) only each variant's best trial logs its MLflow model when the sweep
ends; every trial keeps its final checkpoint in storage, from which this logs the same model later."""


def by_name_options(p: argparse.ArgumentParser, what: str) -> None:
    """NAME, --storage, --address and --json of the commands that take a sweep by its name."""
    p.add_argument("name", help=f"the sweep's name (its folder under --storage){what}").completer = complete_names
    p.add_argument("--storage", default=api.DEFAULT_STORAGE, help="where the sweep ran (default %(default)s)")
    p.add_argument(
        "--address",
        help="the Ray cluster's dashboard, e.g. http://HEAD:8265 (default: the one a submitted sweep recorded, "
        "else $RAY_ADDRESS)",
    )
    p.add_argument("--json", action="store_true", help="print JSON, for scripts")


def complete_names(prefix: str, parsed_args: argparse.Namespace, **_) -> list[str]:
    """Tab completion of NAME: the sweeps under --storage."""
    from sweeper.running.sweeps import sweep_names
    from sweeper.storage.store import open_storage

    try:
        names = sweep_names(open_storage(getattr(parsed_args, "storage", None) or api.DEFAULT_STORAGE, "completion"))
    except Exception:  # noqa: BLE001 - completion never fails a shell
        return []
    return [name for name in names if name.startswith(prefix)]


def print_json(value) -> None:
    import json

    print(json.dumps(value, indent=2, default=str))


def cmd_list(args: argparse.Namespace) -> int:
    """The table of every readable sweep, then one line on stderr per damaged one (exit 0: one was listed; with
    nothing readable, sweep_infos refuses in one line)."""
    from sweeper.running.sweeps import DAMAGED, table

    rows = [info.row() for info in api.sweep_infos(args.storage, args.address)]
    damaged = [row for row in rows if row["state"] == DAMAGED]
    if args.json:
        print_json(rows)
    else:
        print(printable(table([row for row in rows if row["state"] != DAMAGED]) or f"no sweeps in {args.storage}"))
        for row in damaged:
            say(f"sweeper list: {escape(row['name'])} is damaged: {one_line(row['detail'])}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from sweeper.running.sweeps import describe

    info = api.sweep_status(args.name, storage=args.storage, address=args.address)
    if args.json:
        print_json(asdict(info))
    else:
        print(printable("\n".join(describe(info))))
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    done = api.stop_sweep(args.name, storage=args.storage, address=args.address, wait_s=args.wait)
    if args.json:
        print_json({"message": done.message, "sweep": asdict(done.sweep)})
    else:
        print(printable(done.message))
        if args.wait:
            print(printable(f"sweep {args.name}: {done.sweep.state}"))
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    log = api.sweep_logs(args.name, storage=args.storage, address=args.address, tail=args.tail)
    if args.json:
        print_json({"name": args.name, "source": log.source, "text": log.text})
    else:
        print(f"# {one_line(log.source)}", file=sys.stderr)  # where it came from; the log itself on stdout
        sys.stdout.write(printable(log.text))  # a terminal's escapes in a log are shown, not acted on
    return 0


def cmd_promote(args: argparse.Namespace) -> int:
    done = api.promote(args.name, args.trial, storage=args.storage, tracking_uri=args.tracking_uri)
    if args.json:
        print_json(done)
    else:
        print(
            printable(
                f"trial {done['trial']} of sweep {done['name']}: model models:/{done['model_id']} "
                f"(run {done['run_id']}, {done['bytes'] / 1e6:.1f} MB)"
            )
        )
    return 0


def add_by_name_commands(sub) -> None:
    """`sweeper list | status | stop | logs | promote`: sweeps by name (sweeper/running/sweeps.py,
    sweeper/running/models.py)."""
    raw = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "list", help="the sweeps in a storage and on a cluster", epilog=LIST_EXAMPLE, formatter_class=raw
    )
    p.add_argument("--storage", default=api.DEFAULT_STORAGE, help="where the sweeps ran (default %(default)s)")
    p.add_argument("--address", help="a Ray cluster's dashboard: its sweeps' jobs too (default: $RAY_ADDRESS)")
    p.add_argument("--json", action="store_true", help="print a JSON array, for scripts")
    p.set_defaults(func=cmd_list)
    for command, what, extra, func in (
        ("status", "a sweep's state, counts, best so far and live board", "", cmd_status),
        ("stop", "stop a running sweep gracefully (`sweeper resume NAME` finishes it)", " --wait 300", cmd_stop),
        ("logs", "a sweep's log: its Ray job's, else sweep.log in storage", " --tail 50", cmd_logs),
    ):
        epilog = BY_NAME_EXAMPLE.format(command=command, extra=extra)
        p = sub.add_parser(command, help=what, description=what, epilog=epilog, formatter_class=raw)
        by_name_options(p, "")
        p.set_defaults(func=func)
        if command == "stop":
            p.add_argument(
                "--wait", type=float, default=0.0, metavar="SECONDS", help="wait up to this long for it to stop"
            )
        if command == "logs":
            p.add_argument("--tail", type=int, metavar="N", help="only the last N lines")
    p = sub.add_parser(
        "promote", help="log the MLflow model of a trial that has none", epilog=PROMOTE_EXAMPLE, formatter_class=raw
    )
    p.add_argument("name", help="the sweep's name (its folder under --storage)").completer = complete_names
    p.add_argument("trial", help="the trial's id, e.g. 8f3a1_00004 (results.parquet's trial_id)")
    p.add_argument("--storage", default=api.DEFAULT_STORAGE, help="where the sweep ran (default %(default)s)")
    p.add_argument("--tracking-uri", help=TRACKING_RECORDED_HELP)
    p.add_argument("--json", action="store_true", help="print JSON, for scripts")
    p.set_defaults(func=cmd_promote)


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
        "--storage",
        default=api.DEFAULT_STORAGE,
        help="where Ray keeps trials and results.parquet (default %(default)s)",
    )
    p.add_argument(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the YAML's "
        "tracking.uri, else sqlite:///mlflow.db)",
    )
    p.add_argument("--address", help=address_help)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def add_validate(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="check a sweep YAML and print the plan: trials, resources, conditionals",
        epilog="the sections' settings (base: a trial config, see nmt train --help):\n" + help_lines(SPEC_SETTINGS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("space", help="sweep YAML (see search_spaces/)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)
    p.set_defaults(func=cmd_validate)


def add_run(sub) -> None:
    p = sub.add_parser(
        "run",
        help="run a sweep on a local Ray (or --address) and track it in MLflow",
        epilog=RUN_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(p, "Ray cluster address (default: $RAY_ADDRESS, else a local Ray for this run)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    p.set_defaults(func=cmd_run)


def add_submit(sub) -> None:
    p = sub.add_parser("submit", help="run a sweep on a Ray cluster as a Ray Job")
    add_run_options(p, "the Ray cluster's dashboard, e.g. http://HEAD:8265 (default: $RAY_ADDRESS)")
    p.set_defaults(storage=api.SUBMITTED_STORAGE)
    p.add_argument("--wait", action="store_true", help="stream the job's log and exit with its result")
    p.add_argument(
        "--no-code",
        action="store_true",
        help="use the nmt-sweeper installed on the cluster instead of shipping this checkout's code",
    )
    p.set_defaults(func=cmd_submit)


def add_resume(sub) -> None:
    p = sub.add_parser("resume", help="finish an interrupted sweep", description=RESUME_HELP)
    stored_sweep_options(p)
    p.add_argument(
        "--budget",
        type=budget_hours,
        help="hours of the sweep's resources.budget_unit it may spend in all, in place of the budget it ran with",
    )
    p.set_defaults(func=cmd_resume)


def stored_sweep_options(p: argparse.ArgumentParser) -> None:
    """What `resume` and `extend` take: a sweep in storage by name, its tracking store and the Ray to run it on."""
    p.add_argument("name", help="the sweep's name (its folder under --storage)")
    p.add_argument("--storage", default=api.DEFAULT_STORAGE, help="where the sweep ran (default %(default)s)")
    p.add_argument("--tracking-uri", help=TRACKING_RECORDED_HELP + "; it must hold the sweep's parent run")
    p.add_argument("--address", help="Ray cluster address (default: $RAY_ADDRESS, else a local Ray)")
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)


EXTEND_HELP = """add the next look's seeds to a designed sweep (a space with a `design:` section): the design
frozen when the sweep started is read at the look its seeds reached, and every row still in an undecided primary
comparison gets the next block of seeds, as trials of the same sweep (storage, MLflow experiment and parent run).
An interrupted look is finished first, nothing run twice."""
EXTEND_EXAMPLE = """example:
  sweeper run search_spaces/sact_study_tatoeba_cpu_designed.yaml     # look 1
  sweeper extend sact-designed --until-decided                        # the next looks, to a decision
  sweeper extend sact-designed --until-decided --job --address http://HEAD:8265 --storage s3://bucket/sweeps"""


RESTORE_HELP = """rebuild a designed sweep from the data its summary wrote (summary/data/, as committed with a
study): its MLflow parent and trial runs, sweeper.json and results.parquet, in storage that holds no sweep of its
name; SPACE is the file it ran with, and its design must be the one the sweep froze (the digests agree). Then
`sweeper extend` runs its next look. Checkpoints and models are not in the data and are not restored."""
RESTORE_EXAMPLE = """example:
  sweeper restore search_spaces/sact_study_tatoeba_cpu_designed.yaml \\
      --from-data docs/results/sact_study_tatoeba_cpu_designed/data --storage study/sweeps
  sweeper extend sact-designed --storage study/sweeps --until-decided"""


def add_restore(sub) -> None:
    p = sub.add_parser(
        "restore",
        help="a designed sweep rebuilt from its summary's data, to be extended",
        description=RESTORE_HELP,
        epilog=RESTORE_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("space", help="the sweep YAML the sweep ran with")
    p.add_argument("--from-data", required=True, metavar="DIR", help="a summary folder or its data/ folder")
    p.add_argument("--storage", default=api.DEFAULT_STORAGE, help="where to put the sweep (default %(default)s)")
    p.add_argument(
        "--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the YAML's, else sqlite)"
    )
    p.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    p.set_defaults(func=cmd_restore)


def add_extend(sub) -> None:
    p = sub.add_parser(
        "extend",
        help="a designed sweep's next look: seeds where a primary comparison is undecided",
        description=EXTEND_HELP,
        epilog=EXTEND_EXAMPLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    stored_sweep_options(p)
    p.add_argument("--until-decided", action="store_true", help="look after look, to a decision or the maximum")
    p.add_argument("--job", action="store_true", help="as a Ray Job: --address names the cluster's dashboard")
    p.add_argument("--wait", action="store_true", help="with --job: stream the job's log and exit with its result")
    p.set_defaults(func=cmd_extend)


def add_summarize(sub) -> None:
    """`sweeper summarize`: what it reads (this parser), then what it computes and writes (summary_options)."""
    p = sub.add_parser("summarize", help="the papers' tables and figures from a finished sweep (read from MLflow)")
    p.add_argument("name", help="the sweep's name (its MLflow experiment)")
    p.add_argument("--tracking-uri", help=TRACKING_RECORDED_HELP)
    p.add_argument(
        "--storage",
        default=api.DEFAULT_STORAGE,
        help="where the sweep ran; its summary goes there (default %(default)s)",
    )
    summary_options(p)
    p.add_argument(
        "--from-data",
        metavar="DIR",
        help="recompute every table and figure from a summary folder's data/ (written beside every summary.md) "
        "instead of the tracking store; the output goes to --out (default: ./NAME-from-data)",
    )
    p.add_argument(
        "--plan",
        type=positive_bleu,
        metavar="BLEU",
        help="also print, for each seed-aware comparison, the seeds a row a next study needs to detect this "
        "difference (80%% power), from this sweep's variances",
    )
    p.set_defaults(func=cmd_summarize)


def summary_options(p: argparse.ArgumentParser) -> None:
    """summarize's --format, --out, --run-id, --with, --choose and --resamples."""
    p.add_argument(
        "--format",
        choices=["md", "csv", "latex"],
        default="md",
        help="summary.md is always written; csv or latex adds the BLEU table in that format",
    )
    p.add_argument("--out", help="output folder (default: STORAGE/NAME/summary)")
    p.add_argument("--run-id", help="the sweep's MLflow parent run (default: the newest sweep of that name)")
    p.add_argument("--with", dest="added", action="append", default=[], metavar="OTHER[@RUN_ID]", help=WITH_HELP)
    p.add_argument("--choose", dest="chosen", action="append", default=[], metavar="KEY", help=CHOOSE_HELP)
    resamples = SPEC_SETTINGS["significance.resamples"]
    p.add_argument(
        "--resamples",
        type=int,
        help="paired-bootstrap resamples or approximate-randomization shuffles, "
        f"{resamples.allowed()} (default: the space's significance.resamples, else {resamples.default})",
    )


def add_schema(sub) -> None:
    p = sub.add_parser("schema", help="write the JSON Schemas of the sweep YAML and the trial config, for editors")
    p.add_argument("--out", help="folder (default: the package's sweeper/schemas/, which search_spaces/ points to)")
    p.set_defaults(func=cmd_schema)


def build_parser() -> argparse.ArgumentParser:
    """`sweeper` and its subcommands, each added by its own function, in the order `--help` lists them."""
    parser = GateParser(prog="sweeper", description=__doc__)
    add_version(parser)
    sub = parser.add_subparsers(dest="command", required=True, help="what to do (each has its own --help)")
    for add in (
        add_validate,
        add_run,
        add_submit,
        add_resume,
        add_extend,
        add_restore,
        add_summarize,
        add_schema,
        add_by_name_commands,
    ):
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse, call the API function of the subcommand (`args.func`), and print its one-line error if it refuses:
    every check lives in the API (sweeper/api.py check_arguments), and every line passes the gate out. Whatever
    else is raised (a server's, a library's or this program's error) is the last-resort handler's one line
    (nmt_core/gates/faults.py): exit 2 for a store or server that failed, 1 for a fault, the traceback behind
    --debug."""
    return main_of(build_parser, run_command, argv)


def run_command(args: argparse.Namespace) -> int:
    """The parsed command; its refusal one line (exit 2), whatever else is raised the last-resort handler's."""
    try:
        return args.func(args)
    except api.SweeperError as err:  # bad input (exit 2), a summary with no finished trial yet (exit 1)
        if args.debug and err.fault is not None:
            say(traceback_text(err.fault).rstrip("\n"))
        say(f"sweeper: error: {one_line(err)}")
        return err.exit_code
    except KeyboardInterrupt:
        say("sweeper: interrupted")
        return 130
    except Exception as err:  # noqa: BLE001 - the last resort: one line, never a traceback
        return report("sweeper", err, args.debug)


if __name__ == "__main__":
    sys.exit(main())
