"""Ways to damage a committed study's data/ folder (what `sweeper summarize --from-data` reads), one at a time: the
unit test of its checks (tests/unit/test_from_data_checks.py) and the trust review's cases (trust_cases.py) plant the
same damages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

Damage = Callable[[Path], None]


def sweep_json(change: Callable[[dict], None]) -> Damage:
    """sweep.json with its fields changed in place by `change`."""

    def damage(data: Path) -> None:
        fields = json.loads((data / "sweep.json").read_text())
        change(fields)
        (data / "sweep.json").write_text(json.dumps(fields))

    return damage


def trial(row: int, column: str, change: Callable[[Any], Any]) -> Damage:
    """trials.parquet with the JSON column `column` of row `row` changed in place by `change`, or a plain column
    replaced by what `change` returns."""

    def damage(data: Path) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = pq.read_table(data / "trials.parquet").to_pylist()
        value = rows[row][column]
        if isinstance(value, str) and value.startswith("{"):
            decoded = json.loads(value)
            change(decoded)
            rows[row][column] = json.dumps(decoded)
        else:
            rows[row][column] = change(value)
        pq.write_table(pa.Table.from_pylist(rows), data / "trials.parquet")

    return damage


def bleu(value: object) -> Callable[[dict], None]:
    """A trial's metrics with this test BLEU."""
    return lambda metrics: metrics.update(bleu_test_avg=value)


def no_rows(data: Path) -> None:
    """trials.parquet with its schema and no trial."""
    import pyarrow.parquet as pq

    pq.write_table(pq.read_table(data / "trials.parquet").slice(0, 0), data / "trials.parquet")
