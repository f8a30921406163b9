"""What `nmt` and `sweeper` share as command lines: `--version`, and shell completion where argcomplete is."""

from __future__ import annotations

import argparse
from importlib import metadata

PACKAGE = "nmt-sweeper"


def package_version() -> str:
    """The installed package's version; a Ray job may run this code shipped as py_modules, not installed."""
    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--version",
        action="version",
        version=f"%(prog)s {package_version()}",
        help=f"print the {PACKAGE} version and exit",
    )


def enable_completion(parser: argparse.ArgumentParser) -> None:
    """Tab completion of subcommands and options once a shell runs `eval "$(register-python-argcomplete PROG)"`;
    argcomplete is optional (the `completion` extra), so without it this does nothing."""
    try:
        import argcomplete
    except ImportError:
        return
    argcomplete.autocomplete(parser)
