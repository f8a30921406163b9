"""Several sweeps summarised as one study: `sweeper summarize NAME --with OTHER`.

A referee asks for one more control row after a study has run; rerunning every row to get one table wastes hours
of compute. The added sweep runs only the new row, and its trials join the study's snapshot here, so that every
table, test and figure compares them with the study's rows. That is only sound where the added trials differ from
the study's in the settings a space says it varies and nothing else: the same data, model, training and decoding,
scored against the same references. Anything else is refused with the setting that differs, never averaged over.
"""

from __future__ import annotations

from collections import Counter

from sweeper.summary.records import SEED_KEY, SummaryError, SweepSnapshot, TrialRecord

# settings that say where a trial kept its files, not what it learned
NOT_COMPARED = frozenset({SEED_KEY, "data.cache_dir"})


def combine(study: SweepSnapshot, added: list[SweepSnapshot]) -> SweepSnapshot:
    """`study` with the trials of each `added` sweep joined to it; the study's space (objective, baseline,
    significance, tracking) governs the summary, and the summary is written to the study's parent run."""
    for other in added:
        check_same_references(study, other)
    records = study.records + [record for other in added for record in other.records]
    check_same_settings(records, study, added)
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
    snapshot.added = [(other.name, other.parent_id) for other in added]
    return snapshot


def check_same_references(study: SweepSnapshot, other: SweepSnapshot) -> None:
    """BLEU and its tests compare translations of the same sentences: the same test sets, line for line."""
    if sorted(other.references) != sorted(study.references):
        raise SummaryError(
            f"sweep {other.name!r} was tested on {', '.join(sorted(other.references)) or 'nothing'}, sweep "
            f"{study.name!r} on {', '.join(sorted(study.references))}: a combined summary needs the same test sets"
        )
    for test_set, lines in study.references.items():
        if other.references[test_set] != lines:
            raise SummaryError(
                f"sweep {other.name!r} scored test set {test_set!r} against other references than sweep "
                f"{study.name!r} ({len(other.references[test_set])} lines, {len(lines)} there): a combined summary "
                "needs the same sentences"
            )


def check_same_settings(records: list[TrialRecord], study: SweepSnapshot, added: list[SweepSnapshot]) -> None:
    """Every setting that acts in a trial and that no sweep varies holds one value across all the trials. A sweep
    varies the keys of its space's parameters, and any key whose value differs between its own trials (a sweep
    recorded before space.yaml kept its parameters)."""
    sweeps = [study, *added]
    varied = set().union(*(sweep.space.varied for sweep in sweeps), *(varied_within(sweep) for sweep in sweeps))
    first_seen: dict[str, tuple[object, TrialRecord]] = {}
    for record in records:
        for key, value in record.config.active().items():
            if key in NOT_COMPARED or key in varied:
                continue
            seen, where = first_seen.setdefault(key, (value, record))
            if value != seen:
                raise SummaryError(
                    f"{key} is {seen!r} in run {where.run_id} ({where.variant}) but {value!r} in run "
                    f"{record.run_id} ({record.variant}), and no sweep varies it: a combined summary compares "
                    "trials that differ only in what their sweeps vary (name the key in the added space's "
                    "parameters if the difference is the point)"
                )


def varied_within(sweep: SweepSnapshot) -> set[str]:
    """The settings whose value differs between a sweep's own trials."""
    values: dict[str, set] = {}
    for record in sweep.records:
        for key, value in record.config.active().items():
            values.setdefault(key, set()).add(repr(value))
    return {key for key, seen in values.items() if len(seen) > 1}


def check_no_trial_twice(records: list[TrialRecord]) -> None:
    """A variant's seed counted twice would shrink its seed spread: the same settings and seed once only."""
    seen: dict[tuple, str] = {}
    for record in records:
        key = tuple(sorted(item for item in record.params.items() if item[0] not in NOT_COMPARED - {SEED_KEY}))
        if key in seen:
            raise SummaryError(
                f"runs {seen[key]} and {record.run_id} are the same trial ({record.variant}, seed "
                f"{record.params.get(SEED_KEY)}): each variant's seeds may come from one sweep only"
            )
        seen[key] = record.run_id
