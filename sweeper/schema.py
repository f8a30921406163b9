"""JSON Schemas of the sweep YAML and the trial config, so that editors complete and check keys as they do for
W&B sweep files and Kubernetes manifests (`# yaml-language-server: $schema=...` on a YAML's first line).

Generated from the code's own definitions, never written by hand: the dataclasses of nmt_core/config.py and
sweeper/space.py (keys, types, defaults, and the comment beside each field as its description), their
allowed-value tuples (enums) and their bounds (`Bound`). `sweeper schema` rewrites the shipped files in
sweeper/schemas/; a test fails when they differ from what this module generates now.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt_core.config import BOUNDS, CHOICES, Bound, ConfigError, TrialConfig, all_keys, section_keys
from nmt_core.gate import output_folder, write_file
from sweeper.space import (
    DISTRIBUTIONS,
    FAILURE_FIELDS,
    NAME_RULE,
    OBJECTIVE_FIELDS,
    PBT_MUTABLE,
    RESOURCES_FIELDS,
    SPEC_BOUNDS,
    SPEC_CHOICES,
    TOP_LEVEL,
    TRACKING_FIELDS,
    SchedulerSpec,
    SearchSpec,
    SignificanceSpec,
)

SCHEMA_DIR = Path(__file__).parent / "schemas"
DIALECT = "https://json-schema.org/draft/2020-12/schema"
JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}
RANGES = ("uniform", "loguniform", "int")  # the distributions over [low, high]; choice and grid list values
FIELD_NOTE = re.compile(r"^\s+(?P<name>\w+): [^=]+=[^#]*#\s*(?P<note>.+)$")
TRIAL = "#/$defs/trial"


def _notes(cls: type) -> dict[str, str]:
    """The comment beside each field of a dataclass (`epochs: int = 12  # ...`): an editor shows it on hover."""
    return {m["name"]: m["note"] for m in map(FIELD_NOTE.match, inspect.getsource(cls).splitlines()) if m}


def bound_keywords(bound: Bound) -> dict[str, float]:
    keywords = {"exclusiveMinimum" if bound.open_low else "minimum": bound.low}
    if bound.high is not None:
        keywords["exclusiveMaximum" if bound.open_high else "maximum"] = bound.high
    return keywords


def key_schema(
    kind: str, enum: tuple | None = None, bound: Bound | None = None, note: str = "", default: Any = dataclasses.MISSING
) -> dict[str, Any]:
    """One scalar key: its JSON type, allowed values, bounds, default and description."""
    schema: dict[str, Any] = {"type": JSON_TYPES[kind]}
    if enum:
        schema["enum"] = list(enum)
    if bound:
        schema.update(bound_keywords(bound))
    if default is not dataclasses.MISSING:
        schema["default"] = default
    described = "; ".join(text for text in (note, bound.note if bound else "") if text)
    if described:
        schema["description"] = described
    return schema


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An object that takes these keys and no other (the code refuses unknown keys too)."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}


def trial_sections() -> dict[str, Any]:
    """data, model, attention, train, decode: every key with CHOICES as enums and BOUNDS as bounds."""
    sections = {}
    for section, cls in ((f.name, f.default_factory) for f in dataclasses.fields(TrialConfig)):
        notes = _notes(cls)
        sections[section] = closed(
            {
                key: key_schema(
                    f.type,
                    CHOICES.get(f"{section}.{key}"),
                    BOUNDS.get(f"{section}.{key}"),
                    notes.get(f.name, ""),
                    f.default,
                )
                for key, f in section_keys(section).items()
            }
        )
    return sections


def trial_schema() -> dict[str, Any]:
    return {
        "$schema": DIALECT,
        "title": "nmt-sweeper trial config",
        "description": "One configuration for `nmt train` (and a sweep's `base`); dotted keys such as "
        "attention.lambda name its options everywhere.",
        **closed(trial_sections()),
    }


def value_ref(key: str) -> dict[str, str]:
    """A JSON pointer to a dotted trial key's schema inside the sweep schema's embedded trial config."""
    section, name = key.split(".")
    return {"$ref": f"{TRIAL}/properties/{section}/properties/{name}"}


def distribution(key: str) -> dict[str, Any]:
    """`parameters.<key>`: exactly one distribution, its values (or [low, high]) valid for that key, and `if`."""
    values = {"type": "array", "minItems": 1, "items": value_ref(key)}
    pair = {"type": "array", "minItems": 2, "maxItems": 2}
    shapes = {
        "choice": values,
        "grid": values,
        "uniform": {**pair, "items": value_ref(key)},
        "loguniform": {**pair, "items": {**value_ref(key), "exclusiveMinimum": 0}},
        "int": {**pair, "items": {**value_ref(key), "type": "integer"}},
    }
    assert set(shapes) == set(DISTRIBUTIONS), "a new distribution needs its shape here"
    section, name = key.split(".")
    numeric = section_keys(section)[name].type in ("int", "float")
    kinds = [k for k in DISTRIBUTIONS if numeric or k not in RANGES]
    return closed(
        {**{k: shapes[k] for k in kinds}, "if": {"$ref": "#/$defs/condition"}}, oneOf=[{"required": [k]} for k in kinds]
    )


def spec_section(
    section: str, fields: dict[str, str], defaults: dict[str, Any] | None = None, notes: dict[str, str] | None = None
) -> dict[str, Any]:
    """A sweep section of scalar keys (field name -> type name), with SPEC_CHOICES and SPEC_BOUNDS."""
    defaults, notes = defaults or {}, notes or {}
    return closed(
        {
            name: key_schema(
                kind,
                SPEC_CHOICES.get(f"{section}.{name}"),
                SPEC_BOUNDS.get(f"{section}.{name}"),
                notes.get(name, ""),
                defaults.get(name, dataclasses.MISSING),
            )
            for name, kind in fields.items()
        }
    )


def dataclass_section(section: str, cls: type, **special: dict[str, Any]) -> dict[str, Any]:
    """A sweep section backed by a dataclass (search, scheduler, significance); `special` for non-scalar keys."""
    scalars = {f.name: f.type for f in dataclasses.fields(cls) if f.name not in special}
    schema = spec_section(section, scalars, {f.name: f.default for f in dataclasses.fields(cls)}, _notes(cls))
    schema["properties"].update(special)
    return schema


def mutations() -> dict[str, Any]:
    """`scheduler.mutations` (pbt): a key PBT may change -> a list of numbers or {uniform|loguniform: [low, high]}."""
    numbers = {"type": "array", "minItems": 1, "items": {"type": "number"}}
    interval = {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "number", "minimum": 0}}
    ranged = {
        "type": "object",
        "minProperties": 1,
        "maxProperties": 1,
        "additionalProperties": False,
        "properties": {"uniform": interval, "loguniform": interval},
    }
    return {
        "type": "object",
        "propertyNames": {"enum": list(PBT_MUTABLE)},
        "additionalProperties": {"anyOf": [numbers, ranged]},
        "description": _notes(SchedulerSpec)["mutations"],
    }


def starting_points() -> dict[str, Any]:
    """`search.points_to_evaluate` (optuna): a list of {dotted key: value}, each value valid for its key."""
    return {
        "type": "array",
        "items": closed({key: value_ref(key) for key in all_keys()}),
        "description": _notes(SearchSpec)["points_to_evaluate"],
    }


def name_pattern() -> str:
    """NAME_RULE anchored: a JSON Schema pattern matches anywhere in the string, as re.search does."""
    pattern = NAME_RULE.pattern
    return pattern if pattern.startswith("^") and pattern.endswith("$") else f"^(?:{pattern})$"


def sweep_schema() -> dict[str, Any]:
    def fields_of(names: dict[str, type]) -> dict[str, str]:
        return {name: typ.__name__ for name, typ in names.items()}

    properties = {
        "name": {
            "type": "string",
            "pattern": name_pattern(),
            "description": "the sweep: MLflow experiment, Ray run and storage folder name",
        },
        "description": {"type": "string"},
        "data": {"$ref": f"{TRIAL}/properties/data", "description": "merged into base.data"},
        "base": {"$ref": TRIAL, "description": "the trial config every trial starts from"},
        "parameters": closed(
            {key: distribution(key) for key in all_keys()},
            description="dotted trial keys -> one distribution each, optionally `if`",
        ),
        "search": dataclass_section(
            "search",
            SearchSpec,
            points_to_evaluate=starting_points(),
            study_storage={
                "type": ["string", "null"],
                "default": None,
                "description": _notes(SearchSpec)["study_storage"],
            },
        ),
        "objective": spec_section("objective", fields_of(OBJECTIVE_FIELDS)),
        "scheduler": dataclass_section("scheduler", SchedulerSpec, mutations=mutations()),
        "resources": spec_section("resources", fields_of(RESOURCES_FIELDS)),
        "failure": spec_section("failure", fields_of(FAILURE_FIELDS)),
        "tracking": spec_section("tracking", fields_of(TRACKING_FIELDS)),
        "baseline": closed(
            {key: value_ref(key) for key in all_keys()},
            description="dotted trial keys -> the values naming the summary's baseline",
        ),
        "significance": dataclass_section("significance", SignificanceSpec),
    }
    assert list(properties) == list(TOP_LEVEL), "every top-level key of a sweep YAML needs its schema here"
    scalar = {"type": ["string", "number", "boolean", "null"]}
    return {
        "$schema": DIALECT,
        "title": "nmt-sweeper sweep",
        "description": "A sweep YAML for `sweeper validate | run | submit` (see search_spaces/).",
        **closed(properties, required=["name"]),
        "$defs": {
            "trial": closed(trial_sections()),
            "condition": {
                "type": "object",
                "propertyNames": {"enum": all_keys()},
                "additionalProperties": {"anyOf": [scalar, {"type": "array", "items": scalar}]},
                "description": "the parameter exists only when these keys take these values",
            },
        },
    }


FILES: dict[str, Callable[[], dict[str, Any]]] = {"sweep.schema.json": sweep_schema, "trial.schema.json": trial_schema}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def write(folder: Path = SCHEMA_DIR) -> list[Path]:
    """(Re)write both schema files into `folder` through the gate's writes: a folder (not a file or a link), files
    replaced whole and never written through a link."""
    folder = output_folder(folder, "--out", "sweeper schema", ConfigError)
    return [write_file(folder, name, render(make()).encode(), ConfigError, "--out") for name, make in FILES.items()]
