"""The link a sweep prints, opened in a real browser (Debian's headless Chromium) against a real `mlflow server`:
what a researcher sees. This is the test that tells when an MLflow release changes the saved view's format
(sweeper.mlflow_view.TESTED_MLFLOW)."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By

from sweeper.metrics import VARIANT, VARIANT_NAME
from sweeper.mlflow_view import RUN_NAME, WIDTHS, column
from tests.browser import chromium, close_assistant, have_chromium, texts, wait_for
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, FinishedSweep, run_watched, write_space

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_chromium(), reason="needs chromium, chromium-driver (.ci/run installs them)"),
]

SECTION = "[data-testid='experiment-view-compare-runs-section-header']"
CARD = "[data-testid='experiment-view-compare-runs-card']"
PARALLEL = "Parallel Coordinates"  # the title MLflow gives the saved view's card (sweeper.mlflow_view.charts)


@pytest.fixture(scope="module")
def viewed_sweep(tmp_path_factory, mlflow_server) -> FinishedSweep:
    """2 variants x 2 seeds, 1 epoch each, against the session's MLflow server."""
    folder = tmp_path_factory.mktemp("viewed")
    space = write_space(
        folder,
        name="e2e-view",
        parameters={"attention.temperature": {"grid": ["none", "sact"]}},
        search={"max_concurrent": 2, "repeats": 2},
        tracking=LEAN_TRACKING,
        **{"base.train": {**SPACE["base"]["train"], "epochs": 1}},
    )
    sweep = run_watched(space, folder, mlflow_server.uri)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    return sweep


def printed_link(sweep: FinishedSweep) -> str:
    """The one `MLflow: <link>` line, after the results and the summary (only the line naming Ray's log follows)."""
    lines = sweep.stdout.strip().splitlines()
    links = [i for i, line in enumerate(lines) if line.startswith("MLflow: ")]
    assert len(links) == 1 and links[0] >= len(lines) - 2, lines[-5:]
    return lines[links[0]].removeprefix("MLflow: ")


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

        after = next(h for h in driver.find_elements(By.CSS_SELECTOR, SECTION) if h.text.startswith("speed"))
        driver.execute_script("arguments[0].scrollIntoView({block: 'end'})", after)  # result's last row in view

        def parallel(d):  # the view's parallel coordinates (its section's last card), drawn once in view
            card = next((c for c in d.find_elements(By.CSS_SELECTOR, CARD) if PARALLEL in c.text), None)
            return card if card is not None and "seed" in card.text else None

        card = wait_for(driver, parallel, "the parallel coordinates")
        assert "result" in card.text, card.text  # its axes: the swept setting, the seed, best dev BLEU (cut by plotly)


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
