"""What each row's answer cost (issue 73 item 3): its trials' device-seconds (wall time x the GPUs, else CPU cores, a
trial held; sweeper.running.compute) summed over its seeds, and its BLEU per device-hour. Only a sweep whose every
trial logged `device_s` gets the section: a summary of one from before accounting is written as it was."""

from __future__ import annotations

from dataclasses import dataclass

from sweeper.summary.statistics import Summary, VariantRow

DEVICE_S, DEVICE_UNIT_TAG = "device_s", "sweeper.device_unit"  # a trial's total and what its device is (GPU, CPU core)


@dataclass
class RowCost:
    device_hours: float  # summed over the row's seeds
    per_trial: float  # device-hours a seed, on average

    def bleu_per_hour(self, row: VariantRow) -> float | None:
        """The row's mean test BLEU per device-hour one of its trials took (None for a trial that took none)."""
        return row.average[0] / self.per_trial if self.per_trial > 0 else None


@dataclass
class CostTable:
    rows: dict[int, RowCost]  # id(row) -> its cost
    device: str  # GPU, CPU core, or both where trials differ

    @property
    def total_hours(self) -> float:
        return sum(cost.device_hours for cost in self.rows.values())


def cost_table(summary: Summary) -> CostTable | None:
    """Each row's device-hours, where every trial of the summary logged its device-seconds; else None."""
    records = [r for row in summary.rows for r in row.records]
    if not records or any(DEVICE_S not in r.metrics for r in records):
        return None
    costs = {}
    for row in summary.rows:
        hours = [r.metrics[DEVICE_S] / 3600 for r in row.records]
        costs[id(row)] = RowCost(sum(hours), sum(hours) / len(hours))
    devices = sorted({r.tags.get(DEVICE_UNIT_TAG, "device") for r in records})
    return CostTable(costs, " or ".join(devices))
