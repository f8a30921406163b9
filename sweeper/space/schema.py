"""JSON Schemas of the sweep YAML and the trial config, so that editors complete and check keys as they do for
W&B sweep files and Kubernetes manifests (`# yaml-language-server: $schema=...` on a YAML's first line).

Generated from the settings' declarations, never written by hand: each field of nmt_core/config.py's and
sweeper/space/spec.py's sections declares its type, default, bound, allowed values and help (nmt_core.gates.settings),
and the attention parts' registry their names (enums). `sweeper schema` rewrites the shipped files in
sweeper/schemas/; a test fails when they differ from what this module generates now.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nmt_core.config import CHOICES, SETTINGS, ConfigError, all_keys
from nmt_core.gates.gate import output_folder, write_file
from nmt_core.gates.settings import Bound, Setting, declared, markdown_table
from sweeper.space.design import CHOICES as DESIGN_CHOICES
from sweeper.space.design import TESTS
from sweeper.space.spec import (
    DISTRIBUTIONS,
    MAX_OBJECTIVES,
    NAME_RULE,
    PBT_MUTABLE,
    SECTIONS,
    SPEC_SETTINGS,
    TOP_LEVEL,
)

SCHEMA_DIR = Path(__file__).parents[1] / "schemas"  # sweeper/schemas: the search spaces' $schema lines name it
DIALECT = "https://json-schema.org/draft/2020-12/schema"
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}
RANGES = ("uniform", "loguniform", "int")  # the distributions over [low, high]; choice and grid list values
TRIAL = "#/$defs/trial"


def bound_keywords(bound: Bound) -> dict[str, float]:
    keywords = {"exclusiveMinimum" if bound.open_low else "minimum": bound.low}
    if bound.high is not None:
        keywords["exclusiveMaximum" if bound.open_high else "maximum"] = bound.high
    return keywords


def key_schema(declared_as: Setting, enum: tuple[str, ...] = ()) -> dict[str, Any]:
    """One scalar setting: its JSON type (null too where it is optional), allowed values, bounds, default and help
    (an editor shows it on hover)."""
    kind = JSON_TYPES[declared_as.kind]
    schema: dict[str, Any] = {"type": [kind, "null"] if declared_as.optional else kind}
    enum = enum or declared_as.choices
    if enum:
        schema["enum"] = list(enum)
    bound = declared_as.bound
    if bound:
        schema.update(bound_keywords(bound))
    schema["default"] = declared_as.default
    described = "; ".join(text for text in (declared_as.help, bound.note if bound else "") if text)
    if described:
        schema["description"] = described
    return schema


def closed(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """An object that takes these keys and no other (the code refuses unknown keys too)."""
    return {"type": "object", "properties": properties, "additionalProperties": False, **extra}


def trial_sections() -> dict[str, Any]:
    """data, model, attention, train, decode: every key with CHOICES as enums and BOUNDS as bounds."""
    sections: dict[str, dict[str, Any]] = {}
    choices = dict(CHOICES.items())
    for key, declared_as in SETTINGS.items():
        section, name = key.split(".")
        sections.setdefault(section, {})[name] = key_schema(declared_as, choices.get(key, ()))
    return {section: closed(properties) for section, properties in sections.items()}


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
    numeric = SETTINGS[key].kind in (int, float)
    kinds = [k for k in DISTRIBUTIONS if numeric or k not in RANGES]
    return closed(
        {**{k: shapes[k] for k in kinds}, "if": {"$ref": "#/$defs/condition"}}, oneOf=[{"required": [k]} for k in kinds]
    )


def sweep_section(section: str, **special: dict[str, Any]) -> dict[str, Any]:
    """A sweep section from its settings' declarations (sweeper.space.spec.SECTIONS); `special` for keys that are not
    scalars."""
    return closed({name: special.get(name) or key_schema(d) for name, d in declared(SECTIONS[section]).items()})


def objectives() -> dict[str, Any]:
    """`objective`: one {metric, mode}, or a list of them (several objectives: the summary's Pareto front)."""
    one = sweep_section("objective")
    several = {"type": "array", "minItems": 1, "maxItems": MAX_OBJECTIVES, "items": one}
    return {"oneOf": [one, several], "description": "one objective, or a list of several (a Pareto front)"}


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
        "description": SPEC_SETTINGS["scheduler.mutations"].help,
    }


def comparisons() -> dict[str, Any]:
    """`design.comparisons`: each a test, the settings picking its treatment and control rows, a margin, `choose`."""
    rows = closed({key: value_ref(key) for key in all_keys()})
    one = closed(
        {
            "test": {"enum": list(TESTS)},
            "treatment": rows,
            "control": rows,
            "margin": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
            "choose": {"enum": list(DESIGN_CHOICES)},
        }
    )
    one["required"] = ["test", "treatment", "control"]
    return {"type": "array", "items": one, "description": SPEC_SETTINGS["design.comparisons"].help}


def starting_points() -> dict[str, Any]:
    """`search.points_to_evaluate` (optuna): a list of {dotted key: value}, each value valid for its key."""
    return {
        "type": "array",
        "items": closed({key: value_ref(key) for key in all_keys()}),
        "description": SPEC_SETTINGS["search.points_to_evaluate"].help,
    }


def name_pattern() -> str:
    """NAME_RULE anchored: a JSON Schema pattern matches anywhere in the string, as re.search does."""
    pattern = NAME_RULE.pattern
    return pattern if pattern.startswith("^") and pattern.endswith("$") else f"^(?:{pattern})$"


def sweep_schema() -> dict[str, Any]:
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
        "search": sweep_section("search", points_to_evaluate=starting_points()),
        "objective": objectives(),
        "scheduler": sweep_section("scheduler", mutations=mutations()),
        "resources": sweep_section("resources"),
        "failure": sweep_section("failure"),
        "tracking": sweep_section("tracking"),
        "baseline": closed(
            {key: value_ref(key) for key in all_keys()},
            description="dotted trial keys -> the values naming the summary's baseline",
        ),
        "significance": sweep_section("significance"),
        "design": sweep_section("design", comparisons=comparisons()),
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


DOCS = Path(__file__).parents[2] / "docs" / "sweeps.md"  # its settings tables, in a source checkout
BEGIN, END = (
    "<!-- settings: generated by `python -m sweeper.space.schema`; do not edit by hand -->",
    "<!-- settings: end -->",
)


def settings_tables() -> str:
    """docs/sweeps.md's settings tables, from the declarations (nmt_core.gates.settings), between BEGIN and END."""
    return (
        f"{BEGIN}\n\n#### The sweep's sections\n\n{markdown_table(SPEC_SETTINGS)}\n"
        f"#### The trial config (a sweep's `base`, `nmt train`'s file)\n\n"
        f"{markdown_table(SETTINGS, dict(CHOICES.items()))}\n{END}"
    )


def with_settings_tables(text: str) -> str:
    """A docs page's text with the part between BEGIN and END generated afresh."""
    head, _, rest = text.partition(BEGIN)
    return head + settings_tables() + rest.partition(END)[2]


FILES: dict[str, Callable[[], dict[str, Any]]] = {"sweep.schema.json": sweep_schema, "trial.schema.json": trial_schema}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2) + "\n"


def write(folder: Path = SCHEMA_DIR) -> list[Path]:
    """(Re)write both schema files into `folder` through the gate's writes: a folder (not a file or a link), files
    replaced whole and never written through a link."""
    folder = output_folder(folder, "--out", "sweeper schema", ConfigError)
    return [write_file(folder, name, render(make()).encode(), ConfigError, "--out") for name, make in FILES.items()]


if __name__ == "__main__":  # a developer's command: rewrite docs/sweeps.md's settings tables from the declarations
    DOCS.write_text(with_settings_tables(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
