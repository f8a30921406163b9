"""What `nmt` and `sweeper` share as command lines: a parser whose errors pass the gate, `--version`, and shell
completion where argcomplete is."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from nmt_core.gates.faults import add_debug
from nmt_core.gates.gate import one_line
from nmt_core.gates.streams import guard_streams, library_output, say, settle

PACKAGE = "nmt-sweeper"


def package_version() -> str:
    """The installed package's version; a Ray job may run this code shipped as py_modules, not installed."""
    from importlib import metadata  # here: it loads the email package, and only --version asks

    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "(not installed)"


class VersionAction(argparse.Action):
    """argparse's `version` action with the version looked up when `--version` is given, not when the parser is
    built: every other command (and `--help`) then neither imports importlib.metadata nor scans the installed
    packages."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: Any, values: Any, option_string: Any = None):
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action=VersionAction, help=f"print the {PACKAGE} version and exit")


def enable_completion(parser: argparse.ArgumentParser) -> None:
    """Tab completion of subcommands and options once a shell runs `eval "$(register-python-argcomplete PROG)"`;
    argcomplete is optional (the `completion` extra), so without it this does nothing."""
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)


class GateParser(argparse.ArgumentParser):
    """argparse's parser whose own errors (an unknown option, a missing value, a choice not allowed: messages that
    quote what was typed) are one line through the gate's display, exit 2, like every other refusal."""

    def error(self, message: str) -> NoReturn:
        say(f"{self.prog}: error: {one_line(message)} (see {self.prog} --help)")
        sys.exit(2)


def main_of(
    build_parser: Callable[[], argparse.ArgumentParser],
    run_command: Callable[[argparse.Namespace], int],
    argv: list[str] | None = None,
) -> int:
    """Both CLIs' `main`: the standard streams made safe to write (an encoding that cannot write a character, a
    closed stream: never a fault), then the parsed command with `--debug` and tab completion, libraries' own log
    lines kept off the console unless `--debug`, and whatever is left to flush settled at the end."""
    guard_streams()
    try:
        parser = build_parser()
        add_debug(parser)
        enable_completion(parser)
        args = parser.parse_args(argv)
        with library_output(args.debug):
            return run_command(args)
    finally:
        settle()
