"""Several sweeps summarised as one study: `sweeper summarize NAME --with OTHER`.

A referee asks for one more control row after a study has run; rerunning every row to get one table wastes hours
of compute. The added sweep runs only the new row, and its trials join the study's snapshot here, so that every
table, test and figure compares them with the study's rows. That is only sound where an added trial differs from
the study's trials in what the study varies and in what only the new row has (a fixed tau where the study had no
fixed temperature), nothing else: the same data, model, training, scheduler, objective and BLEU, scored against the
same references. Anything else is refused with the setting that differs, never averaged over.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from nmt_core.gates.gate import shown
from sweeper.summary.records import SEED_KEY, SummaryError, SweepSnapshot, TrialRecord, alignment_sets
from sweeper.tracking.metrics import SIGNATURE_TAGS


def combine(study: SweepSnapshot, added: list[SweepSnapshot], chosen: tuple[str, ...] = ()) -> SweepSnapshot:
    """`study` with the trials of each `added` sweep joined to it; the study's space (objective, baseline,
    significance, tracking) governs the summary, and the summary is written to the study's parent run. The
    `chosen` settings (`--choose`, each row's on dev: choose.py) may differ between the sweeps."""
    for other in added:
        check_same_run_setup(study, other)
        check_same_references(study, other)
        check_same_settings(study, other, chosen)
    records = study.records + [record for other in added for record in other.records]
    check_no_trial_twice(records)
    snapshot = SweepSnapshot(
        study.name,
        study.parent_id,
        study.parent_status,
        study.space,
        records,
        sum((other.left_out for other in added), Counter(study.left_out)),
        study.references,
        {**study.translations, **{k: v for other in added for k, v in other.translations.items()}},
        {**study.alignment, **{k: v for other in added for k, v in other.alignment.items()}},
        {**study.traces, **{k: v for other in added for k, v in other.traces.items()}},
    )
    snapshot.added = [(other.name, other.parent_id, other.parent_status) for other in added]
    snapshot.unfinished = study.unfinished + [params for other in added for params in other.unfinished]
    return snapshot


def check_same_run_setup(study: SweepSnapshot, other: SweepSnapshot) -> None:
    """What picks a trial's tested epoch and what scores it: the scheduler (ASHA keeps its survivors, PBT changes
    settings in flight), the objective, BLEU's signature, and which test sets carry alignment statistics."""
    for what, mine, theirs in (
        ("scheduler", study.space.scheduler, other.space.scheduler),
        ("objective", vars(study.space.objective), vars(other.space.objective)),
        ("BLEU signature", signatures(study), signatures(other)),
        ("alignment test sets", alignment_sets(study.records), alignment_sets(other.records)),
    ):
        if mine != theirs:
            raise SummaryError(
                f"sweep {other.name!r} has {what} {shown(theirs)}, sweep {study.name!r} {shown(mine)}: a combined "
                "summary needs them the same"
            )


def signatures(sweep: SweepSnapshot) -> set[str]:
    return {record.tags.get(SIGNATURE_TAGS["bleu_signature"], "") for record in sweep.records}


def check_same_references(study: SweepSnapshot, other: SweepSnapshot) -> None:
    """BLEU and its tests compare translations of the same sentences: the same test sets, line for line."""
    if sorted(other.references) != sorted(study.references):
        raise SummaryError(
            f"sweep {other.name!r} was tested on {shown(sorted(other.references))}, sweep {study.name!r} on "
            f"{shown(sorted(study.references))}: a combined summary needs the same test sets"
        )
    for test_set, lines in study.references.items():
        if other.references[test_set] != lines:
            raise SummaryError(
                f"sweep {other.name!r} scored test set {test_set!r} against other references than sweep "
                f"{study.name!r} ({len(other.references[test_set])} lines, {len(lines)} there): a combined summary "
                "needs the same sentences"
            )


def check_same_settings(study: SweepSnapshot, other: SweepSnapshot, chosen: tuple[str, ...] = ()) -> None:
    """A setting that acts in both an added trial and a study trial holds the same value in both, unless the study
    varies it (its space's parameters, or what differs between its own trials) or it is chosen per row on dev:
    the added row is then one more value of a key the table already shows. A setting only the added row has (a
    fixed tau) defines it. The seed is compared by check_no_trial_twice."""
    varied = set(study.space.varied) | varied_within(study) | {SEED_KEY, *chosen}
    values: dict[str, tuple[Any, TrialRecord]] = {}
    for record in study.records:
        for key, value in record.config.active().items():
            values.setdefault(key, (value, record))
    for record in other.records:
        for key, value in record.config.active().items():
            if key in varied or key not in values or value == values[key][0]:
                continue
            seen, where = values[key]
            raise SummaryError(
                f"{key} is {shown(seen)} in run {where.run_id} ({where.variant}) of sweep {study.name!r} but "
                f"{shown(value)} in run {record.run_id} ({record.variant}) of sweep {other.name!r}, and "
                f"{study.name!r} does not vary it: a combined summary compares trials that differ only in what the "
                "study varies, in what the added row alone has, and in what --choose chooses per row on dev"
            )


def varied_within(sweep: SweepSnapshot) -> set[str]:
    """The settings whose value differs between a sweep's own trials."""
    values: dict[str, set[str]] = {}
    for record in sweep.records:
        for key, value in record.config.active().items():
            values.setdefault(key, set()).add(repr(value))
    return {key for key, seen in values.items() if len(seen) > 1}


def check_no_trial_twice(records: list[TrialRecord]) -> None:
    """A variant's seed counted twice would shrink its seed spread: the same settings and seed once only (more
    seeds of a row from another sweep are welcome)."""
    seen: dict[tuple, str] = {}
    for record in records:
        key = tuple(sorted((name, repr(value)) for name, value in record.config.active().items()))
        if key in seen:
            raise SummaryError(
                f"runs {seen[key]} and {record.run_id} are the same trial ({record.variant}, seed "
                f"{record.params.get(SEED_KEY)}): a variant's seed may be counted once"
            )
        seen[key] = record.run_id
