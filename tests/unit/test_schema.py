"""The JSON Schemas editors read: shipped as the code generates them, and saying what validation says."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from nmt_core.config import ConfigError, build_config
from sweeper.cli import main
from sweeper.space.schema import FILES, SCHEMA_DIR, render
from sweeper.space.spec import SpecError, parse_spec
from tests.conftest import TINY

SPACES = sorted((Path(__file__).parents[2] / "search_spaces").glob("*.yaml"))
EDITOR_LINE = "# yaml-language-server: $schema=../sweeper/schemas/sweep.schema.json"
QUICKSTART = yaml.safe_load(next(p for p in SPACES if p.name == "quickstart.yaml").read_text())


@functools.cache
def validator(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMA_DIR / name).read_text()))


@pytest.mark.parametrize("name", FILES)
def test_the_shipped_schema_is_what_the_code_generates_now_and_valid_json_schema(name):
    assert (SCHEMA_DIR / name).read_text(encoding="utf-8") == render(FILES[name]()), (
        "the code's definitions changed: run `sweeper schema` and commit sweeper/schemas/"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads((SCHEMA_DIR / name).read_text()))


def test_sweeper_schema_writes_both_files(tmp_path, capsys):
    assert main(["schema", "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / name) for name in FILES]
    assert all((tmp_path / name).read_text() == (SCHEMA_DIR / name).read_text() for name in FILES)


@pytest.mark.parametrize("space", SPACES, ids=lambda p: p.name)
def test_every_shipped_space_names_the_schema_on_its_first_line_and_validates(space):
    first = space.read_text().splitlines()[0]
    assert first == EDITOR_LINE
    assert (space.parent / first.split("$schema=")[1]).resolve() == SCHEMA_DIR / "sweep.schema.json"
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator("sweep.schema.json").iter_errors(yaml.safe_load(space.read_text()))
    ]
    assert errors == []


def changed(path: str, value) -> dict:
    """The quickstart with one value replaced (`None` removes it); `path` is slash-separated, as keys hold dots."""
    raw = copy.deepcopy(QUICKSTART)
    *parents, leaf = path.split("/")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        del node[leaf]
    else:
        node[leaf] = value
    return raw


BAD_SPACES = {  # what the code refuses, the schema refuses too
    "unknown top-level key": changed("scheduler_type", "asha"),
    "unknown key in a section": changed("search/sampler_seed", 3),
    "unknown trial key in base": changed("base/train/epoch", 3),
    "unknown parameter key": changed("parameters/attention.heat", {"choice": [1]}),
    "missing name": changed("name", None),
    "name with a space": changed("name", "my sweep"),
    "wrong enum in base": changed("base/attention/score", "cosine"),
    "wrong enum in a parameter's values": changed("parameters/attention.score", {"choice": ["dot", "cosine"]}),
    "wrong enum in a section": changed("search/algorithm", "bayes"),
    "wrong objective": changed("objective/metric", "accuracy"),
    "wrong scheduler": changed("scheduler/type", "median"),
    "wrong type in base": changed("base/train/epochs", "many"),
    "bool for an int": changed("search/num_samples", True),
    "wrong type in a section": changed("resources/cpu", "two"),
    "a bound in base": changed("base/attention/lambda", 1),
    "a bound in a section": changed("search/num_samples", 0),
    "a bound in a parameter's range": changed("parameters/model.dropout", {"uniform": [0.1, 1.5]}),
    "two distributions": changed("parameters/attention.temperature", {"grid": ["none"], "choice": ["sact"]}),
    "no distribution": changed("parameters/attention.temperature", {"if": {"attention.score": "dot"}}),
    "unknown distribution": changed("parameters/train.lr", {"normal": [0, 1]}),
    "a range on a string key": changed("parameters/attention.score", {"uniform": [1, 2]}),
    "a log range from 0": changed("parameters/train.lr", {"loguniform": [0, 1]}),
    "an int range of floats": changed("parameters/model.hidden_size", {"int": [64.5, 128]}),
    "a range of three": changed("parameters/train.lr", {"uniform": [0.1, 0.2, 0.3]}),
    "a mutation PBT cannot make": changed("scheduler", {"type": "pbt", "mutations": {"model.hidden_size": [64]}}),
    "unknown baseline key": changed("baseline", {"attention.heat": 1}),
}


@pytest.mark.parametrize("case", BAD_SPACES)
def test_the_schema_refuses_what_the_code_refuses(case):
    raw = BAD_SPACES[case]
    assert not validator("sweep.schema.json").is_valid(raw)
    with pytest.raises(SpecError):
        parse_spec(yaml.safe_dump(raw, sort_keys=False), "bad.yaml")


def test_the_trial_schema_takes_a_trial_config_and_refuses_bad_ones():
    trial = validator("trial.schema.json")
    assert trial.is_valid(TINY) and trial.is_valid({})
    for section, key, value in [
        ("model", "cell", "transformer"),
        ("train", "epochs", 0),
        ("train", "lr", "fast"),
        ("decode", "beam", 4),
        ("attention", "lambda", 0.5),
    ]:
        raw = {**TINY, section: {**TINY.get(section, {}), key: value}}
        assert not trial.is_valid(raw), (section, key, value)
        with pytest.raises(ConfigError):
            build_config(raw)
    assert not trial.is_valid({**TINY, "optimizer": {"name": "adam"}})
