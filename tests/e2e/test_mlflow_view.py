"""The link a sweep prints, opened in a real browser (Debian's headless Chromium) against a real `mlflow server`:
what a researcher sees. This is the test that tells when an MLflow release changes the saved view's format
(sweeper.tracking.mlflow_view.TESTED_MLFLOW)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from sweeper.tracking.metrics import VARIANT, VARIANT_NAME
from sweeper.tracking.mlflow_view import RUN_NAME, SETTINGS_SECTION, WIDTHS, column
from tests.browser import CELL, COMPARED, chromium, close_assistant, group_also_by, have_chromium, texts, wait_for
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, FinishedSweep, run_watched, write_space

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_chromium(), reason="needs chromium, chromium-driver (.ci/run installs them)"),
]

SECTION = "[data-testid='experiment-view-compare-runs-section-header']"
CARD = "[data-testid='experiment-view-compare-runs-card']"
PARALLEL = "Parallel Coordinates"  # the title MLflow gives the saved view's card (sweeper.tracking.mlflow_view.charts)


@pytest.fixture(scope="module")
def viewed_sweep(tmp_path_factory, mlflow_server, worker_ray) -> FinishedSweep:
    """2 variants x 2 seeds, 1 epoch each, against the session's MLflow server, on the worker's Ray (what the view
    shows is MLflow's: a local Ray started and stopped for it cost about 5 s of CPU)."""
    folder = tmp_path_factory.mktemp("viewed")
    space = write_space(
        folder,
        name="e2e-view",
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        search={"max_concurrent": 2, "repeats": 2},
        tracking=LEAN_TRACKING,
        **{"base.train": {**SPACE["base"]["train"], "epochs": 1}},
    )
    sweep = run_watched(space, folder, mlflow_server.uri, worker_ray)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    return sweep


def printed_link(sweep: FinishedSweep, line_start: str = "MLflow: ") -> str:
    """The one `MLflow: <link>` line, after the results and the summary (only the line naming Ray's log follows),
    or the one line of another link the sweep printed just before it."""
    lines = sweep.stdout.strip().splitlines()
    links = [i for i, line in enumerate(lines) if line.startswith(line_start)]
    assert len(links) == 1 and links[0] >= len(lines) - 3, lines[-5:]
    return lines[links[0]].removeprefix(line_start)


def trial_runs(sweep: FinishedSweep) -> list:
    experiment = sweep.client.get_experiment_by_name(sweep.name)
    return sweep.client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'trial'")


def test_the_link_opens_every_trial_grouped_by_variant_with_the_reading_columns(viewed_sweep):
    link, runs = printed_link(viewed_sweep), trial_runs(viewed_sweep)
    assert "workflowType=machine_learning" in link and "viewStateShareKey=" in link
    names = sorted(run.info.run_name for run in runs)
    labels = sorted({run.data.tags[VARIANT_NAME] for run in runs})  # the summary's words; the key stays a tag
    assert len(names) == 4 and labels == ["SACT λ4", "no temperature"]
    assert {run.data.tags[VARIANT] for run in runs} == {"general+none", "general+sact4"}
    with chromium() as driver:
        driver.get(link)
        cells = f"[role='row'] [col-id='{RUN_NAME}']"  # a cell's lines: its buttons, colour, name (or group, count)

        def lines(d):
            return [line for cell in texts(d, cells) for line in cell.splitlines()]

        shown = wait_for(driver, lambda d: (found := lines(d)) and set(names) <= set(found) and found, "trials")
        assert sorted(t for t in shown if t.startswith("Group: ")) == sorted(f"Group: {label}" for label in labels)
        headers = {h.get_attribute("col-id") for h in driver.find_elements(By.CSS_SELECTOR, ".ag-header-cell")}
        wanted = [column("tags", VARIANT_NAME), column("params", "attention.temperature"), column("params", "seed")]
        wanted += [column("metrics", m) for m in ("result/bleu_dev_best", "result/bleu_test_avg")]
        assert set(wanted) <= headers, headers
        sort = driver.find_element(By.CSS_SELECTOR, "[data-testid='sort-select-dropdown']").text
        assert "result/bleu_dev_best" in sort
        header = driver.find_element(By.CSS_SELECTOR, f".ag-header-cell[col-id='{RUN_NAME}']")
        assert header.size["width"] == WIDTHS[RUN_NAME]  # the saved width applied: names and group labels uncut
    assert all(" · seed " in name for name in names)  # readable: the variant's name and the seed


def test_the_charts_have_a_section_per_name_group_and_bars_for_end_of_run_values(viewed_sweep):
    link, runs = printed_link(viewed_sweep), trial_runs(viewed_sweep)
    prefixes = {name.split("/")[0] for run in runs for name in run.data.metrics if "/" in name} - {"system"}
    assert {"bleu", "loss", "result"} <= prefixes
    with chromium() as driver:
        driver.get(link + "&compareRunsMode=CHART")
        close_assistant(driver)
        sections = wait_for(  # a header reads "bleu\n(1)": the group, its number of charts
            driver,
            lambda d: (found := {t.split()[0] for t in texts(d, SECTION) if t}) >= prefixes and found,
            "sections",
        )
        assert prefixes <= sections
        header = next(h for h in driver.find_elements(By.CSS_SELECTOR, SECTION) if h.text.startswith("result"))
        driver.execute_script("arguments[0].scrollIntoView()", header)  # a section's charts are drawn when seen

        def first_bars(d):
            card = next((c for c in d.find_elements(By.CSS_SELECTOR, CARD) if c.text.startswith("result/")), None)
            return card.find_elements(By.CSS_SELECTOR, ".barlayer .point") if card else []

        bars = wait_for(driver, first_bars, "the bars of an end-of-run value")
        assert len(bars) == len(runs)  # every trial's bar (not one per group, not the first 10 runs only)

        own = next(
            h for h in driver.find_elements(By.CSS_SELECTOR, SECTION) if h.text.startswith(SETTINGS_SECTION["name"])
        )
        driver.execute_script("arguments[0].scrollIntoView()", own)  # its own section, after result's (by name)

        def axes(d):  # the view's parallel coordinates, drawn once in view: its axes' labels
            card = next((c for c in d.find_elements(By.CSS_SELECTOR, CARD) if PARALLEL in c.text), None)
            return card and [label.text for label in card.find_elements(By.CSS_SELECTOR, ".parcoords .label")]

        labels = wait_for(driver, axes, "the parallel coordinates' axes")
        assert labels == ["attention.temperature", "seed", "result/bleu_dev_best"]  # uncut (was `attent...rature`)


def test_the_parent_description_shows_its_figures_and_links_to_the_comparison(viewed_sweep):
    sweep, link = viewed_sweep, printed_link(viewed_sweep)
    experiment = sweep.client.get_experiment_by_name(sweep.name)
    [parent] = sweep.client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'sweep'")
    description = "[data-testid='note-editor-preview-content']"
    with chromium() as driver:
        driver.get(f"{sweep.tracking_uri}/#/experiments/{experiment.experiment_id}/runs/{parent.info.run_id}")
        images = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{description} img"), "figures")
        loaded = "return arguments[0].complete && arguments[0].naturalWidth"
        sizes = wait_for(driver, lambda d: all(d.execute_script(loaded, i) for i in images) and images, "loaded")
        assert sizes and all(driver.execute_script("return arguments[0].naturalHeight", i) > 0 for i in images)
        anchors = driver.find_elements(By.CSS_SELECTOR, f"{description} a")
        assert link in [a.get_attribute("href") for a in anchors if a.text == "Compare its trials"]


def test_a_trials_translations_show_as_a_table(viewed_sweep):
    sweep = viewed_sweep
    best = max(trial_runs(sweep), key=lambda run: run.data.metrics["result/bleu_dev_best"])
    page = f"{sweep.tracking_uri}/#/experiments/{best.info.experiment_id}/runs/{best.info.run_id}/artifacts"
    tables = [a.path for a in sweep.client.list_artifacts(best.info.run_id, "translations") if a.path.endswith(".json")]
    assert tables, "no translations table"
    with chromium() as driver:
        driver.get(f"{page}/{tables[-1]}")
        cells = wait_for(driver, lambda d: [t for t in texts(d, "table th, [role='columnheader']") if t], "a table")
        assert {"source", "reference", "hypothesis"} <= {cell.lower() for cell in cells}, cells


def test_the_trials_translations_compare_sentence_by_sentence(viewed_sweep, tmp_path):
    """The second printed link: the same view without grouping, in MLflow's evaluation view, which lines up the
    translations tables of the trials: each row a dev sentence's source, each trial's hypothesis beside the others',
    as the trials logged them; `reference` picked in its "Group by" puts the reference beside the source."""
    link = printed_link(viewed_sweep, "translations side by side (the first 10 trials by best dev BLEU): ")
    assert "compareRunsMode=ARTIFACT" in link and "-translations" in link
    runs = {run.info.run_id: run for run in trial_runs(viewed_sweep)}
    logged = {}  # run id -> (source, reference) -> hypothesis, from the table each trial logged
    for run_id in runs:
        local = viewed_sweep.client.download_artifacts(run_id, "translations/dev.json", str(tmp_path / run_id))
        table = json.loads(Path(local).read_text(encoding="utf-8"))
        at = {name: table["columns"].index(name) for name in ("source", "reference", "hypothesis")}
        logged[run_id] = {(row[at["source"]], row[at["reference"]]): row[at["hypothesis"]] for row in table["data"]}

    def rows(d, keys: tuple[str, ...]):  # each rendered row: its `keys` cells -> {run id: its hypothesis}
        found = {}
        for row in d.find_elements(By.CSS_SELECTOR, "[role='row']"):
            cells = {c.get_attribute("col-id"): c.text.strip() for c in row.find_elements(By.CSS_SELECTOR, CELL)}
            if all(cells.get(key) for key in keys) and len(set(cells) & set(runs)) >= 2:
                found[tuple(cells[key] for key in keys)] = {run: text for run, text in cells.items() if run in runs}
        return found

    with chromium() as driver:
        driver.get(link)
        wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, COMPARED), "the hypotheses compared")
        close_assistant(driver)
        by_source = wait_for(driver, lambda d: rows(d, ("source",)), "rows of sources and the trials' hypotheses")
        headers = " ".join(texts(driver, "[role='columnheader']"))
        assert all(runs[run_id].info.run_name in headers for row in by_source.values() for run_id in row)
        group_also_by(driver, "reference")
        shown = wait_for(driver, lambda d: rows(d, ("source", "reference")), "rows of source, reference, hypotheses")
    assert {source for source, _ in shown} <= {source for (source,) in by_source}
    for key, hypotheses in shown.items():
        assert len(hypotheses) >= 2 and all(logged[run_id][key] == text for run_id, text in hypotheses.items())
