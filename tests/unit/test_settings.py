"""One declaration per setting (nmt_core/gates/settings.py): what it checks, and everything derived from it (docs
tables, --help) kept current."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nmt_core.config import CHOICES, SETTINGS, ConfigError, build_config
from nmt_core.gates.settings import Bound, Setting, accept, help_lines
from sweeper.space.schema import DOCS, with_settings_tables
from sweeper.space.spec import SPEC_SETTINGS, SpecError, read_section


def test_the_docs_settings_tables_are_generated_from_the_declarations():
    text = DOCS.read_text(encoding="utf-8")
    assert with_settings_tables(text) == text, "stale settings tables: run python -m sweeper.space.schema"
    for key in [*SETTINGS, *SPEC_SETTINGS]:
        assert f"| `{key}` |" in text


def test_help_lists_every_setting_with_its_default_and_bound():
    lines = help_lines(SETTINGS, dict(CHOICES.items())).splitlines()
    assert len(lines) == len(SETTINGS)
    assert "  train.epochs = 12: an integer in [1, " in "\n".join(lines)
    assert any(line.startswith("  attention.score = general: one of ") and "sact" not in line for line in lines)


def test_the_declarations_import_without_torch_ray_or_mlflow():
    blocked = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('torch', 'ray', 'mlflow'):\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import nmt_core.gates.settings\n"
    )
    subprocess.run([sys.executable, "-c", blocked], check=True)


INT = Setting(int, 1, "a count", Bound(1, 10))


@pytest.mark.parametrize(
    "value, message",
    [
        ("x", "k: expected an integer, got 'x'"),
        (True, "k: expected an integer, got True"),
        (2.5, "k: expected an integer, got 2.5"),
        (0, "k: must be in [1, 10] (got 0)"),
        (11, "k: must be in [1, 10] (got 11)"),
        (10**30, "k: must be in [1, 10] (got 1000000000000000000000000000000)"),
    ],
)
def test_accept_refuses_in_one_line_naming_the_key_and_what_is_allowed(value, message):
    with pytest.raises(ConfigError) as raised:
        accept("k", value, INT, "f.yaml", ConfigError)
    assert str(raised.value) == f"f.yaml: {message}"


def test_accept_takes_the_declared_type_and_its_edges():
    assert accept("k", 10, INT, "f", ConfigError) == 10 and accept("k", 1.0, INT, "f", ConfigError) == 1
    number = Setting(float, 0.5, "a share", Bound(0, 1, open_low=True))
    assert accept("k", "1e-3", number, "f", ConfigError) == 0.001 and accept("k", 1, number, "f", ConfigError) == 1.0
    with pytest.raises(ConfigError, match=r"must be in \(0, 1\] \(got 0.0\)"):
        accept("k", 0, number, "f", ConfigError)
    choice = Setting(str, "a", "a letter", choices=("a", "none"))
    assert accept("k", None, choice, "f", ConfigError) == "none"  # YAML's null for a bare `none`
    with pytest.raises(ConfigError, match=r"^f: k: must be one of a, none \(got 'b'\)$"):
        accept("k", "b", choice, "f", ConfigError)


def test_the_trial_config_and_the_sweep_sections_are_held_to_the_same_declarations():
    with pytest.raises(ConfigError, match=r"^<config>: train\.epochs: must be in \[1, "):
        build_config({"train": {"epochs": 0}})
    with pytest.raises(SpecError, match=r"^s\.yaml: search\.repeats: must be >= 1 "):
        read_section("search", {"repeats": 0}, "s.yaml")
    assert read_section("search", {}, "s.yaml").repeats == SPEC_SETTINGS["search.repeats"].default


# what a run allocates or loops over (issue 61): each needs an upper bound in its declaration
COUNTED = (
    "train.seed",
    "train.epochs",
    "train.lr_patience",
    "train.early_stopping",
    "train.max_steps_per_epoch",
    "train.batch_size",
    "train.token_budget",
    "train.warmup",
    "data.src_vocab",
    "data.tgt_vocab",
    "data.subword_vocab",
    "data.max_len",
    "decode.beam_size",
    "decode.max_src_len",
    "model.layers",
    "model.hidden_size",
)
SPEC_COUNTED = (
    "search.max_concurrent",
    "search.seed",
    "scheduler.grace_period",
    "scheduler.perturbation_interval",
    "resources.cpu",
    "resources.gpu",
    "failure.max_retries",
    "significance.resamples",
)


def test_every_count_a_run_allocates_or_loops_over_has_an_upper_bound():
    assert [key for key in COUNTED if SETTINGS[key].bound.high is None] == []
    assert [key for key in SPEC_COUNTED if SPEC_SETTINGS[key].bound.high is None] == []


def test_a_thirty_digit_seed_is_refused_before_torch_sees_it():
    with pytest.raises(ConfigError, match=r"^<config>: train\.seed: must be in \[0, 2147483647\] .*\(got 10{30}\)$"):
        build_config({"train": {"seed": 10**30}})
    with pytest.raises(SpecError, match=r"search\.seed: must be in \[0, 2147483647\]"):
        read_section("search", {"seed": -1}, "s.yaml")
    with pytest.raises(SpecError, match=r"search\.max_concurrent: must be in \[1, 10000\]"):
        read_section("search", {"max_concurrent": 10**6}, "s.yaml")


def test_exact_takes_only_the_declared_type_as_given():
    """The API passes its arguments on as given: 2.0 lines or "5" seconds are refused, not converted."""
    seconds = Setting(float, 0.0, "seconds", Bound(0, 60))
    assert accept("--wait", 5, seconds, "f", ConfigError, exact=True) == 5.0
    for value, kind, message in [(2.0, INT, "expected an integer, got 2.0"), ("5", seconds, "expected a number")]:
        with pytest.raises(ConfigError, match=message):
            accept("k", value, kind, "f", ConfigError, exact=True)
