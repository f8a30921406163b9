"""Each row at the setting its dev score chose: `sweeper summarize NAME --with OTHER --choose train.lr`.

A referee asks that each row's learning rate be chosen on dev, not one rate for every row (a rate picked on the
baseline favours the baseline). Run the study at each rate (a grid over train.lr, or one sweep a rate joined by
`--with`); here, for each row (its settings but the chosen keys, the seed and the variant label, which may name a
chosen value), the values whose seeds have the best mean objective are kept and the other values' trials leave
every table. The chosen keys then stop being part of a row (TrialRecord.tuned), so that rows compare at their own
chosen values: a SACT row at 2e-3 is tested against a baseline at 4e-3 and matched with its controls at theirs, as
"each row tuned on dev" means. The choice reads the space's objective only (a dev or training metric, never a test
set); the tests that follow do not count it, which the summary's notes say.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from statistics import fmean

from sweeper.space.spec import ObjectiveSpec
from sweeper.summary.records import SummaryError, SweepSnapshot, TrialRecord
from sweeper.summary.statistics import objective_of
from sweeper.tracking.names import names_of

INACTIVE = "inactive"  # a chosen setting a trial did not log: its variant ignores it (warmup without a schedule)


@dataclass(frozen=True)
class Choice:
    """One row's choice: the values tried (as logged), each with its seeds' mean objective and their count, the
    values whose seeds logged no objective, and how many seeds of each value did not finish (failed or stopped)."""

    row: str  # the row's variant label, which its name is looked up by
    keys: tuple[str, ...]
    tried: dict[tuple[str, ...], tuple[float, int]]  # empty: no seed logged the objective, nothing was chosen
    unscored: list[tuple[str, ...]]
    chosen: tuple[str, ...]
    unfinished: Counter  # value -> seeds that did not finish

    def line(self, name: str, metric: str) -> str:
        """The summary's note on the row named `name` (as the summary's rows and MLflow's runs name it), e.g.
        `no temperature` at train.lr 0.004: the best mean bleu_dev of its seeds (0.004: 21.84, 5 seeds; 0.002:
        21.53, 3 seeds, 2 did not finish)."""
        if not self.tried:
            return f"`{name}`: no seed logged {metric}, so no {'/'.join(self.keys)} was chosen"
        order = [self.chosen, *(value for value in self.tried if value != self.chosen), *self.unscored]
        means = [self.described(value, metric) for value in order]
        only = "" if len(means) > 1 else ", the only value run"
        survivors = ", chosen on the seeds that finished" if self.unfinished[self.chosen] else ""
        return (
            f"`{name}` at {'/'.join(self.keys)} {'/'.join(self.chosen)}: the best mean {metric} of its seeds "
            f"({'; '.join(means)}{only}){survivors}"
        )

    def described(self, value: tuple[str, ...], metric: str) -> str:
        """One value's part of the note: its seeds' mean and count (or no objective), and its unfinished seeds."""
        mean = f"{self.tried[value][0]:.2f}, {self.tried[value][1]} seeds" if value in self.tried else f"no {metric}"
        unfinished = f", {self.unfinished[value]} did not finish" if self.unfinished[value] else ""
        return f"{'/'.join(value)}: {mean}{unfinished}"


def choose_on_objective(snapshot: SweepSnapshot, keys: tuple[str, ...]) -> SweepSnapshot:
    """`snapshot` with each row's trials at the value of `keys` whose seeds' mean objective is best; the others
    counted as left out, and each row's choice kept for the summary's notes (snapshot.choices)."""
    objective = snapshot.space.objective
    rows: dict[tuple, dict[tuple[str, ...], list[TrialRecord]]] = {}
    for record in snapshot.records:
        tuned = replace(record, tuned=frozenset(keys))  # its group is the row it would join once chosen
        rows.setdefault(tuned.group, {}).setdefault(value_of(record.params, keys), []).append(tuned)
    if all(len(by_value) == 1 for by_value in rows.values()):
        raise SummaryError(
            f"--choose {' '.join(keys)}: every row ran one value of it, so there is nothing to choose; run the other "
            "values as a grid in the space or as sweeps joined with --with"
        )
    unfinished: dict[tuple, Counter] = {}  # a row's seeds that failed or were stopped, by value: the choice names them
    for params in snapshot.unfinished:
        trial = TrialRecord("", "", params.get("variant", "?"), params, {}, {}, tuned=frozenset(keys))
        unfinished.setdefault(trial.group, Counter())[value_of(params, keys)] += 1
    sign = 1 if objective.mode == "max" else -1
    kept, choices, left_out, value_sets = [], [], 0, set()
    for group, by_value in rows.items():
        tried = {value: score for value, members in by_value.items() if (score := mean_objective(members, objective))}
        failed = unfinished.get(group, Counter())
        unscored = [value for value in {**by_value, **failed} if value not in tried]
        if not tried:  # nothing to choose on: every value stays, a row of its own (the key stays in its group)
            kept += [replace(record, tuned=frozenset()) for members in by_value.values() for record in members]
            choices.append(Choice(next(iter(by_value.values()))[0].variant, keys, {}, unscored, (), failed))
            continue
        # sorted by the logged values' text first: a tie goes to the same value on every run
        chosen = max(sorted(tried), key=lambda value: sign * tried[value][0])
        kept += by_value[chosen]
        left_out += sum(len(members) for value, members in by_value.items() if value != chosen)
        choices.append(Choice(by_value[chosen][0].variant, keys, tried, unscored, chosen, failed))
        value_sets.add(frozenset(by_value))
    names = names_of(kept)  # the names the summary gives the rows kept
    notes = [choice.line(names[choice.row], objective.metric) for choice in choices]
    notes.append(selection_note(keys, value_sets))
    why = f"at a value of {'/'.join(keys)} their row's mean {objective.metric} did not choose"
    return replace(
        snapshot,
        records=kept,
        left_out=snapshot.left_out + Counter({why: left_out} if left_out else {}),
        choices=notes,
    )


def value_of(params: dict[str, str], keys: tuple[str, ...]) -> tuple[str, ...]:
    """A trial's values of the chosen settings, as logged (INACTIVE where its variant ignores one)."""
    return tuple(params.get(key, INACTIVE) for key in keys)


def mean_objective(members: list[TrialRecord], objective: ObjectiveSpec) -> tuple[float, int] | None:
    """The seeds' mean objective and how many seeds logged a finite one; None if none did."""
    scores = [s for r in members if (s := objective_of(r, objective.metric, objective.mode)) is not None]
    scores = [s for s in scores if math.isfinite(s)]
    return (fmean(scores), len(scores)) if scores else None


def selection_note(keys: tuple[str, ...], value_sets: set[frozenset]) -> str:
    """What the tests do not count: the best of k values on the same seeds favours the row, more so with more
    values, and rows that tried different values had different chances."""
    note = (
        f"rows are compared at the {'/'.join(keys)} each chose on the objective; the tests do not count that choice "
        f"(the best of several values on the same seeds flatters a row a little, more with more values)"
    )
    if len(value_sets) > 1:
        note += f"; rows tried different values of {'/'.join(keys)}, so some had more chances than others"
    return note
