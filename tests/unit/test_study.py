"""Optuna sweeps' persistent study: where it lives, the samplers, the starting points, resume (real Optuna, SQLite)."""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import optuna
import pyarrow.fs as pafs
import pytest
from optuna.trial import TrialState

from nmt_core.config import ConfigError
from sweeper.running.optuna_search import (
    SAMPLER_CLASSES,
    TRIAL_ID_ATTR,
    make_sampler,
    open_study_storage,
    optuna_searcher,
)
from sweeper.running.study import describe, shown, study_url
from sweeper.space.spec import SAMPLERS, SpecError, parse_spec
from sweeper.storage.store import Storage, open_storage
from tests.unit.test_space import spec_of

OPTUNA = {"algorithm": "optuna", "num_samples": 4, "seed": 0}
POINT = {"attention.temperature": "sact", "attention.lambda": 4}


def optuna_spec(**search):
    return spec_of(**{"search": {**OPTUNA, **search}})


def test_every_sampler_is_named_once_and_builds_seeded():
    assert set(SAMPLER_CLASSES) == set(SAMPLERS)
    for name, modules in SAMPLERS.items():
        if all(importlib.util.find_spec(m) for m in modules):
            sampler = make_sampler(optuna_spec(sampler=name).search)
            assert type(sampler).__name__ == SAMPLER_CLASSES[name]


@pytest.mark.parametrize(
    "sampler", [s for s, modules in SAMPLERS.items() if all(importlib.util.find_spec(m) for m in modules)]
)
def test_each_installed_sampler_runs_the_conditional_space_with_starting_points_first(sampler):
    spec = optuna_spec(sampler=sampler, points_to_evaluate=[POINT, {"attention.temperature": "none"}])
    searcher = optuna_searcher(spec, None)
    configs = [searcher.suggest(f"t{i}") for i in range(4)]
    for i in range(len(configs)):
        searcher.on_trial_complete(f"t{i}", {"bleu_dev": float(i)})
    assert {k: configs[0][k] for k in POINT} == POINT
    assert configs[1]["attention.temperature"] == "none" and "attention.lambda" not in configs[1]
    study = searcher._ot_study
    assert [t.value for t in study.trials] == [0.0, 1.0, 2.0, 3.0]
    assert [t.user_attrs[TRIAL_ID_ATTR] for t in study.trials] == ["t0", "t1", "t2", "t3"]


@pytest.mark.parametrize(
    "search, key, message",
    [
        ({"sampler": "bayes"}, "search.sampler", "must be one of tpe, cmaes, gp, random, qmc"),
        (
            {"points_to_evaluate": [{"train.lr": 1e-3}]},
            "search.points_to_evaluate[0].train.lr",
            "not a parameter of this space",
        ),
        (
            {"points_to_evaluate": [{"attention.lambda": 99}]},
            "search.points_to_evaluate[0].attention.lambda",
            "99 is outside",
        ),
        (
            {"points_to_evaluate": [{"attention.temperature": "bogus"}]},
            "search.points_to_evaluate[0].attention.temperature",
            "'bogus' is outside grid",
        ),
        (
            {"points_to_evaluate": [{"attention.temperature": "none", "attention.lambda": 4}]},
            "search.points_to_evaluate[0].attention.lambda",
            "not active at this point: only if attention.temperature",
        ),
        ({"points_to_evaluate": ["x" * 500]}, "search.points_to_evaluate[0]", "expected a mapping"),
        ({"points_to_evaluate": {"attention.lambda": 4}}, "search.points_to_evaluate", "expected a list"),
        ({"study_storage": "s3://bucket/optuna.db"}, "search.study_storage", "sqlite:///path/optuna.db"),
        ({"study_storage": "postgresql://opt:pg-s3cret@db/optuna"}, "search.study_storage", "PGPASSWORD"),
        ({"algorithm": "grid", "sampler": "gp"}, "search.sampler", "only with search.algorithm optuna"),
        ({"algorithm": "random", "points_to_evaluate": [POINT]}, "search.points_to_evaluate", "only with"),
    ],
)
def test_bad_optuna_search_settings_are_one_line_errors(search, key, message):
    with pytest.raises(ConfigError) as err:  # SpecError, or the credentials check's ConfigError
        optuna_spec(**search)
    line = str(err.value)
    assert f": {key}: " in line and message in line and "\n" not in line and len(line) < 300, line


def test_a_sampler_whose_package_is_missing_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "cmaes", None)  # find_spec answers None, as for a package never installed
    with pytest.raises(SpecError, match=r"search.sampler: cmaes needs cmaes: pip install cmaes$"):
        optuna_spec(sampler="cmaes")


def test_the_space_in_the_yaml_reads_the_new_keys():
    spec = parse_spec(
        "name: s\nparameters: {attention.temperature: {choice: [none, sact]}}\nsearch: {algorithm: "
        "optuna, sampler: qmc, points_to_evaluate: [{attention.temperature: none}]}\n",
        "s.yaml",
    )
    assert spec.search.sampler == "qmc" and spec.search.points_to_evaluate == [{"attention.temperature": "none"}]


def test_where_the_study_lives(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = optuna_spec()
    local = open_storage(str(tmp_path / "sweeps"), "test").below(spec.name)
    assert study_url(spec, local, "http://127.0.0.1:5000") == f"sqlite:///{tmp_path}/sweeps/{spec.name}/optuna.db"
    bucket = Storage("s3://bucket/sweeps", pafs.S3FileSystem(anonymous=True, region="us-east-1"), "bucket/sweeps")
    assert study_url(spec, bucket, f"sqlite:///{tmp_path}/mlflow.db") == f"sqlite:///{tmp_path}/optuna.db"
    assert study_url(spec, bucket, "http://127.0.0.1:5000") is None  # SQLite cannot live in a bucket
    assert "in memory" in describe(spec, None)
    given = optuna_spec(study_storage="sqlite:///studies/o.db")
    assert study_url(given, bucket, "http://127.0.0.1:5000") == f"sqlite:///{tmp_path}/studies/o.db"


def test_a_database_password_is_never_shown():
    url = "postgresql://alice:s3cret@db.example:5432/optuna"
    assert "s3cret" not in shown(url) and "alice" in shown(url)


@pytest.mark.parametrize(
    "url", ["sqlite:////tmp/a b/optuna.db", "sqlite:///rel/o.db", "postgresql+psycopg2://db:5432/x?sslmode=require"]
)
def test_a_url_without_userinfo_is_shown_as_sqlalchemy_renders_it(url):
    """No '@', no password: shown as it is, without loading SQLAlchemy, which would render it the same."""
    from sqlalchemy.engine import make_url

    assert shown(url) == url == make_url(url).render_as_string(hide_password=True)


def test_an_earlier_study_of_the_sweep_is_continued_unless_its_direction_differs(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/optuna.db"
    spec = optuna_spec()
    optuna.create_study(study_name=spec.name, storage=url, direction="maximize").optimize(lambda t: 1.0, n_trials=2)
    _, trials = open_study_storage(url, spec)
    assert len(trials) == 2
    assert f"the Optuna study {spec.name!r} holds 2 trials of an earlier run" in capsys.readouterr().out
    spec.objective.mode = "min"
    with pytest.raises(SpecError, match=r"objective.mode: the Optuna study .* was made to maximize; use another"):
        open_study_storage(url, spec)
    (tmp_path / "file").write_text("")
    with pytest.raises(SpecError, match=r"search.study_storage: sqlite:///.*/file/o.db: cannot open"):
        open_study_storage(f"sqlite:///{tmp_path}/file/o.db", spec)  # a folder that cannot be made


def test_a_restored_searcher_continues_its_study_and_fails_trials_asked_after_its_last_save(tmp_path):
    url = f"sqlite:///{tmp_path}/optuna.db"
    spec = optuna_spec(points_to_evaluate=[POINT])
    searcher = optuna_searcher(spec, url)
    constructed = pickle.dumps(searcher)  # what Tune keeps in tuner.pkl: `Tuner.restore` unpickles, never re-creates
    searcher.suggest("a")
    searcher.on_trial_complete("a", {"bleu_dev": 3.0})
    searcher.suggest("b")  # running when the state is saved: it continues after the restore
    searcher.save(str(tmp_path / "searcher.pkl"))
    searcher.suggest("c")  # asked for after the last save (a killed driver): Tune never reports it
    restored = pickle.loads(constructed)
    restored.restore(str(tmp_path / "searcher.pkl"))
    restored.on_trial_complete("b", {"bleu_dev": 5.0})
    restored.on_trial_complete("a", {"bleu_dev": 9.0})  # a second completion is ignored
    assert optuna.get_all_study_names(url) == [spec.name]
    trials = optuna.load_study(study_name=spec.name, storage=url).trials
    assert [(t.user_attrs[TRIAL_ID_ATTR], t.state, t.value) for t in trials] == [
        ("a", TrialState.COMPLETE, 3.0),
        ("b", TrialState.COMPLETE, 5.0),
        ("c", TrialState.FAIL, None),
    ]
    assert {k: trials[0].params[k] for k in POINT} == POINT


def test_validate_prints_the_sampler_and_where_the_study_will_be(tmp_path, monkeypatch, capsys):
    from sweeper.cli import main as sweeper_main

    space = Path(__file__).parents[2] / "search_spaces" / "lambda_search.yaml"
    monkeypatch.chdir(tmp_path)
    assert sweeper_main(["validate", str(space), "--set", "search.sampler=random"]) == 0
    url = f"sqlite:///{tmp_path}/sweeps/lambda-search/optuna.db"
    assert (
        f"Optuna study 'lambda-search', sampler random (seed 0), in {url}; watch it with `optuna-dashboard {url}` "
        "(with --storage ./sweeps"
    ) in capsys.readouterr().out
    assert not (tmp_path / "sweeps").exists()  # validate writes nothing


def test_a_second_run_of_a_sweep_adds_new_configurations_to_its_study(tmp_path):
    """Same seed, same study: without the seed offset TPE's random startup would replay the first run's draws."""
    url = f"sqlite:///{tmp_path}/optuna.db"
    spec = optuna_spec(points_to_evaluate=[POINT])
    first = optuna_searcher(spec, url)
    drawn = [first.suggest(f"a{i}") for i in range(3)]
    for i in range(3):
        first.on_trial_complete(f"a{i}", {"bleu_dev": float(i)})
    second = optuna_searcher(spec, url)
    again = second.suggest("b0")
    assert {k: again.get(k) for k in POINT} != POINT  # the starting point ran already: not enqueued again
    assert again not in drawn
    assert len(optuna.load_study(study_name=spec.name, storage=url).trials) == 4
