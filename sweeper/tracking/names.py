"""A variant's name as a researcher reads it: `SACT λ4`, where its label, the key machines join on, is
`general+sact4` (issue 59).

A paper's table names its rows by what differs between them and says once what they share; so does a sweep. The
name is the title words of the parts a trial's config selects (`Part.title`, nmt_core.family.variants), less the words
every variant of the sweep shares: in a sweep of temperatures over one score, the score goes without saying. MLflow's
run names (`SACT λ4 · seed 2`, the tag VARIANT_NAME to group by) and the summary's rows, tables and figure legends use
the same names. The label stays where machines read it: the tag `sweeper.variant`, results.parquet, the summary's
data/ and `--with` joins, so sweeps recorded before names still summarise and join.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from nmt_core.family.registry import part_words
from sweeper.space.spec import describe_trial
from sweeper.tracking.metrics import VARIANT_NAME

JOINED = " + "  # between a name's words
TRAINING_WORDS = (  # the training objectives a variant label names, as (field, config key, title)
    ("guided", "guided_alignment", "guided alignment"),
    ("symmetry", "symmetry_weight", "symmetry"),
)
MODEL_NAME_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")  # what a LoggedModel's name may not hold, and more (a slug)


def title_words(cfg: Any) -> dict[str, str]:
    """field -> the title word of each part the config selects, then the training objectives the label names."""
    words = part_words(cfg, "title")
    for field, key, title in TRAINING_WORDS:
        weight = getattr(cfg.train, key)
        if weight > 0:
            words[field] = f"{title} {weight:g}"
    return words


def shared_words(configs: Iterable[Any]) -> dict[str, str]:
    """The title words every one of these configs has (field -> word): what their names leave out. Nothing when
    they are all one variant, whose name would otherwise be empty."""
    seen = [title_words(cfg) for cfg in configs]
    if len({tuple(words.items()) for words in seen}) < 2:
        return {}
    first, rest = seen[0], seen[1:]
    return {field: word for field, word in first.items() if all(words.get(field) == word for words in rest)}


def variant_name(cfg: Any, shared: Mapping[str, str]) -> str:
    """The config's variant name: its title words but those `shared` (the same field with the same word)."""
    words = title_words(cfg)
    kept = [word for field, word in words.items() if shared.get(field) != word]
    return JOINED.join(kept or words.values())


def run_name(name: str | None, label: str, seed: Any) -> str:
    """A trial run's name, `SACT λ4 · seed 2`: its variant's name and its seed; its label where it has no name (a sweep
    begun before names, whose runs MLflow shows as `general+sact4 · seed 2`)."""
    return f"{name or label} · seed {seed}"


@dataclass(frozen=True)
class TrialNames:
    """The one naming rule for a sweep's trials, wherever a person reads a name: the console's board, its line per
    trial and the ranking (sweeper.running.progress, runner.print_best), MLflow's run names and VARIANT_NAME tags
    (the tracking callback holds one of these, sweeper.tracking.runs), results.parquet's `run_name`, and the
    summary's rows, which read those tags (`names_of`). The driver computes the words every planned variant shares
    once (`shared`); `shared` None: a sweep begun before names, whose runs are named by label (`general+sact4 · seed
    2`). Pickled into Tune's state with the progress callback, so a resumed sweep names its trials as before."""

    base: dict[str, Any]  # the sweep's base trial config, which Tune's trial configs complete
    shared: dict[str, str] | None

    def variant(self, cfg: Any) -> str | None:
        """The variant name of a trial config (its run's VARIANT_NAME tag, the summary's row); None before names."""
        return None if self.shared is None else variant_name(cfg, self.shared)

    def trial(self, cfg: Any, label: str) -> str:
        """The name of a trial config with variant label `label`: its run's name."""
        return run_name(self.variant(cfg), label, cfg.train.seed)

    def of(self, config: Mapping[str, Any]) -> str:
        """The name of the trial Tune runs with `config`."""
        return self.trial(*describe_trial(config, self.base))

    def __call__(self, trial: Any) -> str:
        """The name of a Tune trial (the progress callback's `name_of`)."""
        return self.of(trial.config)


def names_of(records: Iterable[Any]) -> dict[str, str]:
    """label -> name of the variants of these trial records (the summary's rows), so that the summary says what
    MLflow shows: the names their runs were given (the tag VARIANT_NAME) where those name each label once and each
    label differently, as one sweep's runs do; the labels themselves where no run has a name (a sweep recorded
    before names, whose runs MLflow shows as `<label> · seed <n>`); else, sweeps joined by `--with` whose runs left
    out other words (or some runs without names), named afresh from what these variants share."""
    records = list(records)
    given: dict[str, set[str]] = {}
    for record in records:
        given.setdefault(record.variant, set()).add(record.tags.get(VARIANT_NAME, ""))
    if all(seen == {""} for seen in given.values()):
        return {label: label for label in given}
    names = {label: next(iter(seen)) for label, seen in given.items() if len(seen) == 1 and "" not in seen}
    if len(names) == len(given) and len(set(names.values())) == len(names):
        return names
    configs = {record.variant: record.config for record in records}
    shared = shared_words(configs.values())
    return {label: variant_name(cfg, shared) for label, cfg in configs.items()}


def model_name(name: str) -> str:
    """A LoggedModel's name for a variant name, e.g. `SACT-lambda4` for `SACT λ4`: MLflow refuses '/', ':', '.',
    '%' and quotes in it, and a `runs:/<id>/<name>` URI reads best without spaces or Greek."""
    spelt = name.replace("λ", "lambda").replace("τ", "tau").replace(".", "_")
    return MODEL_NAME_UNSAFE.sub("-", spelt).strip("-") or "model"
