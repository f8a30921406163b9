"""Parameter importance and parallel coordinates over a sweep's trials."""

import random

from sweeper.summary import importance, plots
from sweeper.summary.records import TrialRecord


def runs(n: int, seed: int = 0):
    """lr decides the objective; dropout is noise-free but irrelevant; the score is categorical and irrelevant. Each
    trial's settings as the summary reads them: MLflow's strings, typed by the record (TrialRecord.active)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        lr, dropout, score = rng.choice([1e-4, 1e-3, 1e-2]), rng.uniform(0, 0.5), rng.choice(["dot", "general"])
        params = {
            "train.lr": str(lr),
            "model.dropout": str(dropout),
            "attention.score": score,
            "train.seed": "1",
            "variant": score,
        }
        record = TrialRecord(f"r{i}", f"t{i}", score, params, {}, {})
        out.append((f"t{i}", record.active, {1e-4: 5.0, 1e-3: 20.0, 1e-2: 12.0}[lr]))
    return out


def test_only_parameters_that_vary_are_axes_and_values_are_typed():
    points, varying = importance.trial_points(runs(4))
    assert varying == ["attention.score", "model.dropout", "train.lr"]  # seed is constant, `variant` is no key
    assert isinstance(points[0].params["train.lr"], float) and isinstance(points[0].params["attention.score"], str)


def test_too_few_trials_is_said_plainly():
    points, varying = importance.trial_points(runs(5))
    result = importance.parameter_importance(points, varying, "bleu_dev", "max")
    assert not result.scores
    assert result.verdict == (
        "too few trials to tell: 5 trials with bleu_dev for 3 varying parameters; fANOVA needs at least 8"
    )


def test_fanova_finds_the_parameter_that_decides_the_objective():
    points, varying = importance.trial_points(runs(30))
    result = importance.parameter_importance(points, varying, "bleu_dev", "max")
    assert set(result.scores) == set(varying)
    assert max(result.scores, key=result.scores.get) == "train.lr" and result.scores["train.lr"] > 0.8
    assert "| train.lr | " in importance.render(result)


def test_one_varying_parameter_gets_everything():
    points, varying = importance.trial_points([("a", {"train.lr": 0.1}, 1.0), ("b", {"train.lr": 0.2}, 2.0)])
    result = importance.parameter_importance(points, varying, "bleu_dev", "max")
    assert result.scores == {"train.lr": 1.0} and result.verdict.startswith("only train.lr varies")


def test_parallel_coordinates_draws_numbers_categories_and_inactive_values(tmp_path):
    path = tmp_path / "pc.png"
    plots.parallel_coordinates(
        {
            "train.lr": [1e-4, 1e-3, 1e-2],
            "attention.lambda": [4.0, None, 2.0],
            "attention.temperature": ["sact", "none", "sact"],
        },
        [10.0, 12.5, 11.0],
        "best bleu_dev",
        path,
    )
    assert path.stat().st_size > 5000
    positions, ticks = plots._axis([4.0, None, 2.0])
    assert [label for _, label in ticks] == ["2.0", "4.0", "n/a"] and positions == [0.5, 1.0, 0.0]


def test_a_number_only_some_variants_have_stays_a_number_for_fanova():
    """attention.tau exists only for fixed-temperature trials: its trials without one sit below its range, so a
    random sweep's hundreds of distinct values do not become hundreds of categories (fANOVA then took hours)."""
    rng = random.Random(1)
    trials = []
    for i in range(300):
        temperature, lr = rng.choice(["none", "fixed"]), 10 ** rng.uniform(-4, -2)
        params = {"attention.temperature": temperature, "train.lr": str(lr)}
        if temperature == "fixed":
            params["attention.tau"] = str(rng.uniform(0.5, 2.0))
        trials.append((f"t{i}", params, 10.0 + 1000 * lr))
    points, varying = importance.trial_points(trials)
    assert [p.params["attention.tau"] for p in points[:3]].count(None) > 0
    result = importance.parameter_importance(points, varying, "bleu_dev", "max")
    assert max(result.scores, key=result.scores.get) == "train.lr" and result.scores["train.lr"] > 0.8
    assert set(result.scores) == {"attention.temperature", "attention.tau", "train.lr"}


def test_a_number_only_some_trials_have_keeps_its_scale_above_n_a_on_its_axis():
    """A random sweep's attention.tau (fixed-temperature trials only) gets three ticks and `n/a`, not one per value."""
    values = [None, *(0.5 + i / 100 for i in range(300)), None]
    positions, ticks = plots._axis(values)
    assert [label for _, label in ticks] == ["0.5", "2", "3.49", "n/a"]
    assert positions[0] == positions[-1] == 0.0 and 0.1 < positions[1] < positions[150] < positions[300] == 1.0
