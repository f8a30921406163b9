"""One declaration per setting: type, default, bound, allowed values and one line of help, written once.

A setting is a field of a section dataclass (nmt_core.config's trial config, sweeper.space.spec's sweep sections) whose
default is `setting(default, help, bound=..., choices=...)`; its type is the field's annotation. Everything that
states what a setting allows reads the declaration: the trial config's and the sweep's validation (`accept`), the
state a sweep stores and the API's arguments (the same `accept`), the JSON Schemas (sweeper.space.schema), `--help` and
the settings table of docs/sweeps.md (`settings_table`). A bound or a choice is never written a second time.

Imports nothing heavy (no torch, Ray or MLflow): `sweeper validate` and `import nmt_core.config` read it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nmt_core.gates.gate import ErrorType, shown

NOUNS = {
    int: "an integer",
    float: "a number",
    bool: "true or false",
    str: "a string",
    list: "a list",
    dict: "a mapping",
}


def _number(value: float) -> str:
    """1000000 rather than 1e+06, 0.5 as 0.5: a bound as a user would write it in YAML."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True)
class Bound:
    """A numeric setting's allowed interval: `accept` checks it and the JSON Schema states it."""

    low: float
    high: float | None = None
    open_low: bool = False  # low itself is not allowed
    open_high: bool = False
    note: str = ""  # why, or what the edge value means

    def holds(self, value: float) -> bool:
        above = value > self.low if self.open_low else value >= self.low
        below = self.high is None or (value < self.high if self.open_high else value <= self.high)
        return above and below

    def __str__(self) -> str:
        low, high = _number(self.low), None if self.high is None else _number(self.high)
        if high is None:
            text = f"{'>' if self.open_low else '>='} {low}"
        else:
            text = f"in {'(' if self.open_low else '['}{low}, {high}{')' if self.open_high else ']'}"
        return text + (f" ({self.note})" if self.note else "")


@dataclass(frozen=True)
class Setting:
    """One setting as declared: what `accept` checks and what the schema, --help and the docs table show."""

    kind: type  # int, float (an int is taken), bool, str, list or dict
    default: Any
    help: str
    bound: Bound | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False  # null is taken too (annotated `X | None`)

    def allowed(self, choices: tuple[str, ...] = ()) -> str:
        """What the setting takes, in words (`choices` where a registry holds them): --help's and the docs'."""
        if choices or self.choices:
            return "one of " + ", ".join(choices or self.choices)
        return NOUNS[self.kind] + (f" {self.bound}" if self.bound else "") + (" or null" if self.optional else "")

    def shown_default(self) -> str:
        """The default as YAML writes it (true, null, [], "")."""
        plain = isinstance(self.default, str) and self.default
        return self.default if plain else json.dumps(self.default)


def setting(default: Any, help: str, bound: Bound | None = None, choices: Iterable[str] = ()) -> Any:
    """A dataclass field holding its declaration (a list or dict default is copied for each instance)."""
    metadata = {"help": help, "bound": bound, "choices": tuple(choices)}
    if isinstance(default, (list, dict)):
        return field(default_factory=functools.partial(copy.deepcopy, default), metadata=metadata)
    return field(default=default, metadata=metadata)


def yaml_key(name: str) -> str:
    """A field's key as YAML writes it: `lambda_` (a Python keyword) is `lambda`."""
    return name.rstrip("_")


@functools.cache
def declared(section: type) -> dict[str, Setting]:
    """A section dataclass's settings by YAML key, read once from its fields' annotations and `setting` metadata."""
    hints = typing.get_type_hints(section)
    found = {}
    for f in dataclasses.fields(section):
        members = [m for m in typing.get_args(hints[f.name]) if m is not type(None)]
        optional = isinstance(hints[f.name], types.UnionType) and len(members) == 1
        hint = members[0] if optional else hints[f.name]
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        kind, meta = typing.get_origin(hint) or hint, f.metadata
        found[yaml_key(f.name)] = Setting(
            kind, default, meta.get("help", ""), meta.get("bound"), meta.get("choices", ()), optional
        )
    return found


def finite(value: int | float, key: str, source: str, error: ErrorType) -> float:
    """A number as a float, refused if it is NaN or infinite (or an integer too large for a float)."""
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise error(key, f"must be a finite number (got {shown(value)})", source)
    return number


def typed(key: str, value: Any, kind: type, source: str, error: ErrorType, exact: bool = False) -> Any:
    """`value` as `kind`: an integral float is an int, an int or a numeric string (YAML 1.1 reads 1e-3 as one) a
    float; a bool is never a number; else one line. `exact`: of `kind` already (an int for a float), nothing
    converted (the API passes its arguments on as given)."""
    if exact and not (type(value) is kind or (kind is float and type(value) is int)):
        raise error(key, f"expected {NOUNS[kind]}, got {shown(value)}", source)
    if kind is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is float and numeric:
        return finite(value, key, source, error)
    if kind is int and numeric and (isinstance(value, int) or value.is_integer()):
        return int(value)
    if kind not in (int, float) and isinstance(value, kind):
        return value
    raise error(key, f"expected {NOUNS[kind]}, got {shown(value)}", source)


def accept(
    key: str,
    value: Any,
    declared_as: Setting,
    source: str,
    error: ErrorType,
    choices: tuple[str, ...] = (),
    exact: bool = False,
) -> Any:
    """`value` of the setting's type (`exact`: see `typed`), one of its choices (or `choices`, where a registry holds
    them) and within its bound; else `error(key, one line saying what is allowed, source)`."""
    choices = choices or declared_as.choices
    if value is None and declared_as.optional:
        return None
    if value is None and choices:  # YAML reads a bare `none` as null
        value = "none"
    value = typed(key, value, declared_as.kind, source, error, exact)
    if choices and value not in choices:
        raise error(key, "must be one of " + ", ".join(choices) + f" (got {shown(value)})", source)
    if declared_as.bound and not declared_as.bound.holds(value):
        raise error(key, f"must be {declared_as.bound} (got {shown(value)})", source)
    return value


def help_lines(settings: Mapping[str, Setting], choices: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """Every setting in a line for --help: key = default, what it takes, and its help."""
    choices = choices or {}
    return "\n".join(
        f"  {key} = {d.shown_default()}: {d.allowed(choices.get(key, ()))}" + (f"; {d.help}" if d.help else "")
        for key, d in settings.items()
    )


def markdown_table(settings: Mapping[str, Setting], choices: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """Every setting as a row of docs/sweeps.md's settings tables: key, default, what it takes, and its help."""
    choices = choices or {}
    rows = ["| key | default | allowed | what |", "| --- | --- | --- | --- |"]
    for key, d in settings.items():
        cells = (f"`{key}`", f"`{d.shown_default()}`", d.allowed(choices.get(key, ())), d.help)
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(rows) + "\n"
