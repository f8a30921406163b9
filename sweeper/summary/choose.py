"""Each row at the setting its dev score chose: `sweeper summarize NAME --with OTHER --choose train.lr`.

A referee asks that each row's learning rate be chosen on dev, not one rate for every row (a rate picked on the
baseline favours the baseline). Run the study at each rate (a grid over train.lr, or one sweep a rate joined by
`--with`); here, for each row (its settings but the chosen keys and the seed), the values whose seeds have the best
mean objective are kept and the other values' trials leave every table. The chosen keys then stop being part of a
row (TrialRecord.tuned), so that rows compare at their own chosen values: a SACT row at 2e-3 is tested against a
baseline at 4e-3 and matched with its controls at theirs, as "each row tuned on dev" means. The choice reads the
space's objective only (dev), never a test set.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from statistics import fmean

from sweeper.summary.records import SweepSnapshot, TrialRecord
from sweeper.summary.statistics import objective_of


@dataclass(frozen=True)
class Choice:
    """One row's choice: the values tried (as logged), each with its seeds' mean objective and their count."""

    row: str  # the row's variant label
    keys: tuple[str, ...]
    tried: dict[tuple[str, ...], tuple[float, int]]
    chosen: tuple[str, ...]

    def line(self, metric: str) -> str:
        """The summary's note, e.g. `scaled_dot+none` at train.lr 0.004: the best mean bleu_dev of its seeds
        (21.84, 5 seeds; 0.002: 21.53, 5 seeds)."""
        tried = [(value, *self.tried[value]) for value in [self.chosen, *(v for v in self.tried if v != self.chosen)]]
        means = "; ".join(f"{'/'.join(value)}: {mean:.2f}, {seeds} seeds" for value, mean, seeds in tried)
        only = "" if len(tried) > 1 else ", the only value run"
        return (
            f"`{self.row}` at {'/'.join(self.keys)} {'/'.join(self.chosen)}: the best mean {metric} of its seeds "
            f"({means}{only})"
        )


def choose_on_objective(snapshot: SweepSnapshot, keys: tuple[str, ...]) -> SweepSnapshot:
    """`snapshot` with each row's trials at the value of `keys` whose seeds' mean objective is best; the others
    counted as left out, and the choices kept for the summary's notes (snapshot.choices)."""
    objective = snapshot.space.objective
    rows: dict[tuple, dict[tuple[str, ...], list[TrialRecord]]] = {}
    for record in snapshot.records:
        row = tuple((k, v) for k, v in record.group if k not in keys)
        value = tuple(record.params.get(key, "") for key in keys)
        rows.setdefault(row, {}).setdefault(value, []).append(record)
    kept, notes, left_out = [], [], 0
    for by_value in rows.values():
        tried = {}
        for value, members in by_value.items():
            scores = [s for r in members if (s := objective_of(r, objective.metric, objective.mode)) is not None]
            if scores:
                tried[value] = (fmean(scores), len(scores))
        if not tried:  # nothing to choose on: every value stays, a row of its own (the key stays in its group)
            kept += [record for members in by_value.values() for record in members]
            variant = next(iter(by_value.values()))[0].variant
            notes.append(f"`{variant}`: no seed logged {objective.metric}, so no {'/'.join(keys)} was chosen")
            continue
        sign = 1 if objective.mode == "max" else -1
        chosen = max(sorted(tried), key=lambda value: sign * tried[value][0])  # sorted: a tie goes to one value
        kept += [replace(record, tuned=frozenset(keys)) for record in by_value[chosen]]
        left_out += sum(len(members) for value, members in by_value.items() if value != chosen)
        notes.append(Choice(by_value[chosen][0].variant, keys, tried, chosen).line(objective.metric))
    why = f"at a {'/'.join(keys)} their row's mean {objective.metric} did not choose"
    not_chosen = Counter({why: left_out} if left_out else {})
    return replace(
        snapshot,
        records=kept,
        left_out=snapshot.left_out + not_chosen,
        choices=notes,
    )
