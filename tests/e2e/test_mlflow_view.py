"""The link a sweep prints, opened in a real browser (Debian's headless Chromium) against a real `mlflow server`:
what a researcher sees, at 1280x800 in a fresh profile (issue 71). This is the test that tells when an MLflow release
changes the saved view's format (sweeper.tracking.mlflow_view.TESTED_MLFLOW)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By

from sweeper.tracking.metrics import RUN_COLOUR, SEED_TAG, VARIANT, VARIANT_NAME
from sweeper.tracking.mlflow_view import RUN_NAME, WIDTHS, column
from tests.browser import (
    CELL,
    COMPARED,
    assistant_seen,
    chromium,
    close_assistant,
    group_also_by,
    have_chromium,
    on_screen,
    react_prop_length,
    scroll_below,
    texts,
    wait_for,
)
from tests.e2e.sweeps import LEAN_TRACKING, FinishedSweep, run_watched, write_space

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not have_chromium(), reason="needs chromium, chromium-driver (.ci/run installs them)"),
]

SECTION = "[data-testid='experiment-view-compare-runs-section-header']"
CARD = "[data-testid='experiment-view-compare-runs-card']"
DESCRIPTION = "[data-testid='note-editor-preview-content']"
PARALLEL = "Parallel Coordinates"  # the title MLflow gives the saved view's card (sweeper.tracking.mlflow_charts)
WINDOW = (1280, 800)  # a laptop's browser: what a researcher sees before any scroll
TRIALS_LINE = "every trial, a dot per seed and the parallel coordinates: "
TRANSLATIONS_LINE = "translations side by side (the first 10 trials by best dev BLEU): "


@pytest.fixture(scope="module")
def viewed_sweep(tmp_path_factory, mlflow_server, worker_ray) -> FinishedSweep:
    """2 variants x 2 seeds, 2 epochs each (a dev curve with a band), against the session's MLflow server, on the
    worker's Ray; lambda swept for SACT only, as in the quickstart: `n/a` beside numbers."""
    folder = tmp_path_factory.mktemp("viewed")
    space = write_space(
        folder,
        name="e2e-view",
        parameters={
            "attention.temperature": {"grid": ["none", "sact"]},
            "attention.lambda": {"grid": [4], "if": {"attention.temperature": ["sact"]}},
        },
        search={"max_concurrent": 2, "repeats": 2},
        tracking=LEAN_TRACKING,
    )
    sweep = run_watched(space, folder, mlflow_server.uri, worker_ray)
    assert sweep.returncode == 0, sweep.stdout[-3000:] + sweep.stderr[-3000:]
    return sweep


def printed_link(sweep: FinishedSweep, line_start: str = "MLflow: ") -> str:
    """The one `MLflow: <link>` line, after the results and the summary (only the line naming Ray's log follows),
    or the one line of another link the sweep printed just before it."""
    lines = sweep.stdout.strip().splitlines()
    links = [i for i, line in enumerate(lines) if line.startswith(line_start)]
    assert len(links) == 1 and links[0] >= len(lines) - 4, lines[-6:]
    return lines[links[0]].removeprefix(line_start)


def trial_runs(sweep: FinishedSweep) -> list:
    experiment = sweep.client.get_experiment_by_name(sweep.name)
    return sweep.client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'trial'")


def test_the_first_screen_shows_every_groups_bleu_beside_its_name(viewed_sweep):
    """At 1280x800: each variant's group row with its mean test BLEU, without scrolling; the trials under it."""
    link, runs = printed_link(viewed_sweep), trial_runs(viewed_sweep)
    assert "workflowType=machine_learning" in link and "viewStateShareKey=" in link
    pages = [line for line in viewed_sweep.stdout.splitlines() if "/#/" in line]
    assert pages and all("workflowType=machine_learning" in line for line in pages)  # every printed link
    names = sorted(run.info.run_name for run in runs)
    labels = sorted({run.data.tags[VARIANT_NAME] for run in runs})  # the summary's words; the key stays a tag
    assert len(names) == 4 and labels == ["SACT λ4", "no temperature"]
    assert {run.data.tags[VARIANT] for run in runs} == {"general+none", "general+sact4"}
    assert all("seed" not in run.data.params and run.data.tags[SEED_TAG] in ("1", "2") for run in runs)
    bleu = column("metrics", "result/bleu_test_avg")
    with chromium(*WINDOW) as driver:
        assistant_seen(driver, link)
        driver.get(link)

        def groups(d):  # row index -> its group's name, from the pinned column of run names
            found = {}
            for row in d.find_elements(By.CSS_SELECTOR, "[role='row'][row-index]"):
                cell = row.find_elements(By.CSS_SELECTOR, f"[col-id='{RUN_NAME}']")  # colour, `Group: <name>`, count
                group = [line for line in (cell[0].text if cell else "").splitlines() if line.startswith("Group: ")]
                if group:
                    found[row.get_attribute("row-index")] = group[0].removeprefix("Group: ")
            return len(found) == len(labels) and found

        shown = wait_for(driver, groups, "a row per group")
        assert sorted(shown.values()) == labels
        trials = {line for cell in texts(driver, f"[col-id='{RUN_NAME}']") for line in cell.splitlines()}
        assert set(names) <= trials  # every group open

        def values(d):  # each group row's BLEU cell
            cells = {}
            for row in d.find_elements(By.CSS_SELECTOR, "[role='row'][row-index]"):
                index = row.get_attribute("row-index")
                for cell in row.find_elements(By.CSS_SELECTOR, f"[col-id='{bleu}']"):
                    if index in shown and re.search(r"\d+\.\d", cell.text):
                        cells[index] = cell
            return len(cells) == len(shown) and cells

        cells = wait_for(driver, values, "each group's mean test BLEU")
        assert all(on_screen(driver, cell) for cell in cells.values()), [c.rect for c in cells.values()]
        headers = {h.get_attribute("col-id") for h in driver.find_elements(By.CSS_SELECTOR, ".ag-header-cell")}
        wanted = [bleu, column("metrics", "result/bleu_dev_best"), column("params", "attention.temperature")]
        assert set(wanted + [column("tags", SEED_TAG)]) <= headers and column("tags", VARIANT_NAME) not in headers
        sort = driver.find_element(By.CSS_SELECTOR, "[data-testid='sort-select-dropdown']").text
        assert "result/bleu_dev_best" in sort
        header = driver.find_element(By.CSS_SELECTOR, f".ag-header-cell[col-id='{RUN_NAME}']")
        assert header.size["width"] == WIDTHS[RUN_NAME]  # the saved width applied: names and group labels uncut
        driver.save_screenshot(str(viewed_sweep.folder / "first-screen.png"))
    assert all(" · seed " in name for name in names)  # readable: the variant's name and the seed


def colours_of(driver, card, css: str, attribute: str) -> set[str]:
    """The colours (`#rrggbb`) of a chart card's SVG elements, read from a style property (`rgb(...)`/`rgba(...)`)."""
    found = set()
    for element in card.find_elements(By.CSS_SELECTOR, css):
        value = driver.execute_script(f"return arguments[0].style.{attribute}", element) or ""
        if match := re.match(r"rgba?\((\d+), ?(\d+), ?(\d+)", value):
            found.add("#" + "".join(f"{int(part):02x}" for part in match.groups()))
    return found


def test_the_charts_open_on_the_answer_a_bar_and_a_band_per_variant_in_the_runs_colours(viewed_sweep):
    link, runs = printed_link(viewed_sweep), trial_runs(viewed_sweep)
    colours = {run.data.tags[RUN_COLOUR] for run in runs}
    assert len(colours) == 2  # a colour a variant: the one MLflow gives its group (mlflow_charts.group_colours)
    with chromium(*WINDOW) as driver:
        assistant_seen(driver, link)
        driver.get(link + "&compareRunsMode=CHART")
        sections = wait_for(driver, lambda d: [t for t in texts(d, SECTION) if t], "sections")
        assert sections[0].startswith("Answer: BLEU, test beam 2, dev greedy")
        assert {"bleu", "attention"} & {t.split()[0] for t in sections[1:]}  # the metrics' sections follow

        def card(d, title):
            return next((c for c in d.find_elements(By.CSS_SELECTOR, CARD) if c.text.startswith(title)), None)

        def bars(d):
            found = card(d, "result/bleu_test_avg")
            return found and len(found.find_elements(By.CSS_SELECTOR, ".barlayer .point")) == 2 and found

        shown = wait_for(driver, bars, "a bar per variant")  # not one a trial
        assert all(on_screen(driver, bar, partly=True) for bar in shown.find_elements(By.CSS_SELECTOR, ".point"))

        def bands(d):  # a group's min-max band: a filled trace in its colour, under its mean line
            found = card(d, "bleu/dev")
            return found and len(colours_of(d, found, ".fills path.js-fill", "fill")) == 2 and found

        curve = wait_for(driver, bands, "a band per variant")
        assert colours_of(driver, curve, ".fills path.js-fill", "fill") == colours  # one palette, runs and groups
        driver.save_screenshot(str(viewed_sweep.folder / "answer.png"))


def test_every_trial_is_a_dot_and_a_line_in_the_ungrouped_views_charts(viewed_sweep):
    """The second saved view: every trial's test BLEU a dot above its variant, and the parallel coordinates draw
    every trial: the baseline's `n/a` lambda is a category beside `lambda=4`, not a run dropped."""
    link, runs = printed_link(viewed_sweep, TRIALS_LINE), trial_runs(viewed_sweep)
    assert "compareRunsMode=CHART" in link and "-translations" in link
    with chromium(*WINDOW) as driver:
        assistant_seen(driver, link)
        driver.get(link)

        def card(d, title):
            return next((c for c in d.find_elements(By.CSS_SELECTOR, CARD) if title in c.text), None)

        def dots(d):
            found = card(d, "view/variant vs. result/bleu_test_avg")
            return found and len(found.find_elements(By.CSS_SELECTOR, ".scatterlayer .point")) == len(runs) and found

        strip = wait_for(driver, dots, "a dot per trial")
        scroll_below(driver, strip)  # the UI renders a card once it is in view
        parallel = wait_for(driver, lambda d: card(d, PARALLEL), "the parallel coordinates")

        def axes(d):
            return [label.text for label in parallel.find_elements(By.CSS_SELECTOR, ".parcoords .label")]

        labels = wait_for(driver, axes, "the parallel coordinates' axes")
        assert labels == ["attention.temperature", "view/attention.lambda", "result/bleu_dev_best"]  # no seed
        ticks = {tick.text for tick in parallel.find_elements(By.CSS_SELECTOR, ".parcoords .tick text")}
        assert {"none", "sact", "n/a", "lambda=4"} <= ticks
        drawn = react_prop_length(driver, parallel.find_element(By.CSS_SELECTOR, ".parcoords"), "data")
        assert drawn == len(runs)  # a line a trial: the lines the chart was handed, after MLflow's own filter
        driver.save_screenshot(str(viewed_sweep.folder / "trials.png"))


def test_the_folded_description_opens_on_the_verdict(viewed_sweep):
    """The parent run's description shows its first 100 pixels folded: the verdict's line, then the variants'
    table in columns, its figures (the dot-per-seed figure first) and its links below "Show more"."""
    sweep, link = viewed_sweep, printed_link(viewed_sweep)
    experiment = sweep.client.get_experiment_by_name(sweep.name)
    [parent] = sweep.client.search_runs([experiment.experiment_id], "tags.`sweeper.role` = 'sweep'")
    page = f"{sweep.tracking_uri}/#/experiments/{experiment.experiment_id}/runs/{parent.info.run_id}"
    with chromium(*WINDOW) as driver:
        assistant_seen(driver, link)
        driver.get(page + "?workflowType=machine_learning")
        box = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, DESCRIPTION), "the description")[0]
        first = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{DESCRIPTION} li"), "the verdict")[0]
        assert re.match(r"SACT λ4 vs no temperature: .+, [+-]\d+\.\d\d \[", first.text), first.text
        offset = driver.execute_script(
            "return arguments[0].getBoundingClientRect().bottom - arguments[1].getBoundingClientRect().top", first, box
        )
        assert offset <= 100 and on_screen(driver, first)  # inside the folded part, on the first screen
        table = driver.find_element(By.CSS_SELECTOR, f"{DESCRIPTION} pre").text.splitlines()
        assert table[0].split()[:2] == ["variant", "test"] and len(table) == 3  # a header and a row a variant
        images = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f"{DESCRIPTION} img"), "figures")
        loaded = "return arguments[0].complete && arguments[0].naturalWidth"
        sizes = wait_for(driver, lambda d: all(d.execute_script(loaded, i) for i in images) and images, "loaded")
        assert sizes and all(driver.execute_script("return arguments[0].naturalHeight", i) > 0 for i in images)
        assert "bleu_by_variant" in images[0].get_attribute("src")
        found = driver.find_elements(By.CSS_SELECTOR, f"{DESCRIPTION} a")  # below "Show more": textContent, not text
        anchors = {a.get_attribute("textContent"): a.get_attribute("href") for a in found}
        assert anchors["Compare its trials"] == link
        assert all("workflowType=machine_learning" in href for href in anchors.values() if "/#/" in href)
        driver.save_screenshot(str(sweep.folder / "description.png"))
        translations = anchors["translations by variant (best seed, chrF)"]
        driver.get(translations)
        frame = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "iframe.mlflow-html-iframe"), "the page")
        driver.switch_to.frame(frame[0])
        heads = wait_for(driver, lambda d: texts(d, "th"), "the translations page's table")
        assert {"source", "reference"} <= set(heads) and any(h.startswith("SACT λ4") for h in heads)
        assert len(driver.find_elements(By.CSS_SELECTOR, "tbody tr")) > 10


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
    link = printed_link(viewed_sweep, TRANSLATIONS_LINE)
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
