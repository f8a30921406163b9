"""The chart cards of the sweep's saved views, and what the trial runs log so that MLflow 3.17's charts draw them as a
researcher reads a sweep (issue 71). What each field does is MLflow's UI's own (docs/operations.md says what a
researcher sees); what it accepts was read from its JS bundle.

- **The answer first.** The UI sorts chart sections by name (`localeCompare`) unless a researcher reorders them, and
  "Answer ..." collates before every metric section (`attention`, `bleu`, ... : n before t). In the comparison view
  (runs grouped by variant, `useGroupedValuesInCharts`) its cards draw one bar per variant (the mean over its seeds,
  labelled) and the dev curve as each variant's mean with its min-max band. MLflow draws no error bars: a bar is
  one aggregate (min, mean or max), never with its spread.
- **One palette.** MLflow colours a group by a hash of its id (`tag.sweeper.variant_name.<name>`) into its own 29
  colours, and nothing outside a browser's localStorage sets it. So a sweep's runs take the colour MLflow gives
  their variant's group (`group_colours`), the colour the summary's figures then draw them in; where two planned
  variants hash to one colour, the runs keep the variants' tab10 colours instead (MLflow's groups then share it).
- **Every trial in the parallel coordinates.** The UI drops a run whose value of an axis is a number where most are
  not, or the reverse: the baseline's `attention.lambda` is `n/a` beside SACT's `4.0`. A swept setting that some
  variants do not use, with numbers for values, is also logged as text (`view/attention.lambda`: `lambda=4`,
  `n/a`), a category on every trial, and the card reads that. Grouped values cannot be drawn there (the UI refuses
  aggregated text), so the parallel coordinates live in the ungrouped view, with a dot per seed by variant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sweeper.tracking.metrics import NOT_APPLICABLE, RESULT, VARIANT_NAME, VIEW_PREFIX

# MLflow 3.17's colours for runs and groups without one set (its `RUNS_COLOR_PALETTE`), in order
MLFLOW_COLOURS = (
    "#a6630c", "#c83243", "#b45091", "#8a63bf", "#434a93", "#137dae", "#04867d", "#308613", "#facb66", "#1f272d",
    "#445461", "#5f7281", "#8396a5", "#93320b", "#be501e", "#de7921", "#f2be88", "#115026", "#277c43", "#3ba65e",
    "#8ddda8", "#9e102c", "#c82d4c", "#e65b77", "#f792a6", "#0e538b", "#2272b4", "#4299e0", "#8acaff",
)  # fmt: skip
BEST_DEV, TEST_AVG, DEV_CURVE = RESULT + "bleu_dev_best", RESULT + "bleu_test_avg", "bleu/dev"
VARIANT_PARAM = VIEW_PREFIX + "variant"  # the variant's name as a param: the dot-per-seed chart's categories
ANSWER = "Answer"  # the first words of the sections the views open with: they sort before every metric's
MANY = 100  # runs or groups a card draws (the UI's default is the first 10)


def group_colour(name: str) -> str:
    """The colour MLflow 3.17 gives the group of runs tagged with variant `name` (its getStableColorForRun over the
    group's id: a Fletcher checksum of its UTF-16 code units into MLFLOW_COLOURS)."""
    group = f"tag.{VARIANT_NAME}.{name}".encode("utf-16-le")
    low = high = 0
    for unit in (int.from_bytes(group[i : i + 2], "little") for i in range(0, len(group), 2)):
        low = (low + unit) % 255
        high = (high + low) % 255
    return MLFLOW_COLOURS[(low | high << 8) % len(MLFLOW_COLOURS)]


def group_colours(names: dict[str, str]) -> dict[str, str]:
    """label -> the colour of its name's group in MLflow (`names`: label -> variant name), where every variant's
    differs; else none, and the runs keep the tab10 colours in the order the sweep meets them."""
    colours = {label: group_colour(name) for label, name in names.items()}
    return colours if len(set(colours.values())) == len(colours) else {}


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def categorical_axes(parameters: Iterable[Any]) -> tuple[str, ...]:
    """The swept settings the parallel coordinates read as text (`view/<key>`): a choice or grid of numbers that
    some variants do not use (an `if:`), which would mix `n/a` with numbers. A range (uniform, loguniform, int)
    stays a number axis: as text, the UI would show its first 30 values only, and it drops the `n/a` trials."""
    return tuple(
        p.key
        for p in parameters
        if p.condition and p.kind in ("choice", "grid") and any(is_number(value) for value in p.values)
    )


def as_category(key: str, value: Any) -> str:
    """A setting's value as a category no reader takes for a number: `lambda=4` (`n/a` where unused)."""
    if value is None or value == NOT_APPLICABLE:
        return NOT_APPLICABLE
    return f"{key.rsplit('.', 1)[-1]}={value:g}" if is_number(value) else str(value)


def view_params(active: dict[str, Any], categorical: Iterable[str], name: str | None) -> dict[str, str]:
    """The params a trial logs for the charts only (VIEW_PREFIX; the summary does not read them): each categorical
    axis as text, and its variant's name."""
    params = {VIEW_PREFIX + key: as_category(key, active.get(key)) for key in categorical}
    return params | ({VARIANT_PARAM: name} if name else {})


def decoding(test_beam: int, dev_beam: int) -> str:
    """How the answer's BLEU decodes, for its section's title: the card titles are the metric keys."""

    def search(beam: int) -> str:
        return "greedy" if beam == 1 else f"beam {beam}"

    return f"test {search(test_beam)}, dev {search(dev_beam)}"


def section(uuid: str, name: str, columns: int) -> dict[str, Any]:
    """A chart section (ChartSectionConfig), open."""
    return {"uuid": uuid, "name": name, "display": True, "isReordered": False, "deleted": False,
            "isGenerated": False, "columns": columns}  # fmt: skip


def card(uuid: str, kind: str, where: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """A chart card of `kind` in section `where` (the fields every card has, then its own)."""
    common = {"uuid": uuid, "type": kind, "metricSectionId": where["uuid"], "runsCountToCompare": MANY}
    return {**common, "deleted": False, "isGenerated": False, **fields}


def line(uuid: str, where: dict[str, Any], key: str) -> dict[str, Any]:
    """Per-epoch values by step; grouped, each group's mean with its min-max band."""
    return card(
        uuid, "LINE", where, metricKey=key, selectedMetricKeys=[key], lineSmoothness=0, xAxisScaleType="linear",
        scaleType="linear", range={}, xAxisKey="step", selectedXAxisMetricKey="", yAxisKey="metric",
        yAxisExpressions=[], ignoreOutliers=False, useGlobalXaxisKey=False, useGlobalLineSmoothing=False,
    )  # fmt: skip


def answer_charts(decoded: str) -> dict[str, Any]:
    """The comparison view's first section: test BLEU a bar per variant beside the dev curves, a mean line with its
    min-max band per variant, then best dev BLEU a bar per variant; two cards a row, so that at 1280 pixels their
    titles (the metric keys) are whole and the first row shows. The section's name says how each BLEU decodes (the
    UI cuts it at about 37 characters: the decoding last). The end-of-run values' own section (`result`, which the
    UI fills) is declared too, two cards a row: three a row cut `result/bleu_dev_best` and
    `result/bleu_dev_final_beam` to one `result/bleu_dev…`."""
    where = section("sweeper-answer", f"{ANSWER}: BLEU, {decoded}", 2)
    cards = [
        card("sweeper-answer-test", "BAR", where, metricKey=TEST_AVG),
        line("sweeper-answer-curve", where, DEV_CURVE),
        card("sweeper-answer-dev", "BAR", where, metricKey=BEST_DEV),
    ]
    results = section("sweeper-result", RESULT.rstrip("/"), 2)  # the name the UI gives result/ keys' section
    return {"compareRunCharts": cards, "compareRunSections": [where, results]}


def trial_charts(axes: list[str], categorical: Iterable[str]) -> dict[str, Any]:
    """The ungrouped view's first section, one card a row: each trial's test BLEU as a dot above its variant's
    name, and the parallel coordinates of the swept settings (those mixing `n/a` with numbers as text) to best dev
    BLEU, one line a trial. No seed axis: it is no setting, and a line a seed shows it. A card a row, so that its
    axes' labels are not cut (the UI cuts one wider than 0.8 of the card over its axes)."""
    where = section("sweeper-trials", f"{ANSWER}: every trial, a dot per seed", 1)
    text = set(categorical)
    strip = card(
        "sweeper-trials-strip", "SCATTER", where,
        xaxis={"key": VARIANT_PARAM, "type": "PARAM"}, yaxis={"key": TEST_AVG, "type": "METRIC"},
    )  # fmt: skip
    parallel = card(
        "sweeper-parallel", "PARALLEL", where, showAllRuns=True, selectedMetrics=[BEST_DEV],
        selectedParams=[VIEW_PREFIX + axis if axis in text else axis for axis in axes],
    )  # fmt: skip
    return {"compareRunCharts": [strip, parallel], "compareRunSections": [where]}
