"""Redraw the screenshots of docs/operations.md ("Comparing the trials in MLflow"): a small real sweep against a
real `mlflow server`, its printed links opened in Debian's headless Chromium at 1280x800 in a fresh profile that has
closed MLflow's assistant panel once (as the browser test does), one PNG a view. It lives beside the PNGs it writes;
run it from the repository root after an MLflow upgrade or a change of what a sweep logs, then look at every PNG
before committing them:

    python docs/screenshots/make_screenshots.py            # about 4 minutes on 2 cores

Needs the `test` extra (selenium) and Debian's `chromium chromium-driver`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.* below

from selenium.webdriver.common.by import By  # noqa: E402

from tests.browser import (  # noqa: E402
    COMPARED,
    assistant_seen,
    chromium,
    close_assistant,
    group_also_by,
    scroll_below,
    texts,
    wait_for,
)
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, run_watched, write_space  # noqa: E402
from tests.servers import MlflowServer  # noqa: E402

HERE = Path(__file__).resolve().parent
SETTLE_S = 3.0  # after the last awaited element: charts animate, images decode
WINDOW = (1280, 800)
SECTION = "[data-testid='experiment-view-compare-runs-section-header']"
CARD = "[data-testid='experiment-view-compare-runs-card']"
DESCRIPTION = "[data-testid='note-editor-preview-content']"


@dataclass
class Sweep:
    """What the screenshots open: the printed links and the runs behind them."""

    link: str  # the comparison
    trials: str  # every trial's charts
    translations: str  # every trial's translations side by side
    runs: str  # the experiment's runs page (no view)
    parent: str
    best: str


def printed(stdout: str, start: str) -> str:
    return next(line for line in stdout.splitlines() if line.startswith(start)).removeprefix(start)


def run_sweep(folder: Path, uri: str) -> Sweep:
    """3 variants x 2 seeds, 2 epochs: enough for curves with bands and for groups; lambda swept for SACT only."""
    space = write_space(
        folder,
        name="screenshots",
        parameters={"attention.temperature": {"grid": ["none", "sact"]},
                    "attention.lambda": {"grid": [4], "if": {"attention.temperature": ["sact"]}},
                    "attention.sentinel": SPACE["parameters"]["attention.sentinel"]},
        search={"max_concurrent": 2, "repeats": 2},
        tracking={**LEAN_TRACKING, "plots": "best"},
        **{"base.train": {**SPACE["base"]["train"], "epochs": 2}},
    )  # fmt: skip
    sweep = run_watched(space, folder, uri)
    if sweep.returncode:
        raise SystemExit(f"the sweep failed ({sweep.returncode}):\n{sweep.stdout[-2000:]}{sweep.stderr[-2000:]}")
    runs = sweep.client.search_runs([sweep.client.get_experiment_by_name(sweep.name).experiment_id])
    parent = next(run for run in runs if run.data.tags.get("sweeper.role") == "sweep")
    return Sweep(
        printed(sweep.stdout, "MLflow: "),
        printed(sweep.stdout, "every trial, a dot per seed and the parallel coordinates: "),
        printed(sweep.stdout, "translations side by side (the first 10 trials by best dev BLEU): "),
        f"{uri}/#/experiments/{parent.info.experiment_id}/runs",
        parent.info.run_id,
        parent.data.tags["sweeper.best_run_id"],
    )


def save(driver, path: Path, settle: float = SETTLE_S) -> None:
    time.sleep(settle)
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def shoot(driver, url: str, ready: str, what: str, path: Path, text: bool = True) -> None:
    """Open `url`, wait until an element matching the CSS `ready` is there (and shows `text`), close the assistant
    (if open), save."""
    driver.get(url)
    wait_for(driver, lambda d: any(texts(d, ready)) if text else d.find_elements(By.CSS_SELECTOR, ready), what)
    close_assistant(driver)
    save(driver, path)


def scrolled_to(driver, css: str, starts: str, path: Path) -> None:
    """Bring the first element matching `css` whose text starts with `starts` into view, save."""

    def found(d):
        return [e for e in d.find_elements(By.CSS_SELECTOR, css) if e.text.startswith(starts)]

    driver.execute_script("arguments[0].scrollIntoView()", wait_for(driver, found, starts)[0])
    save(driver, path, SETTLE_S * 2)


def comparison(driver, sweep: Sweep, out: Path) -> None:
    """The runs table grouped by variant, the charts' answer, the end-of-run values."""
    shoot(driver, sweep.link, "[role='row'] [col-id]", "the runs table", out / "mlflow-runs-grouped.png")
    shoot(driver, sweep.link + "&compareRunsMode=CHART", SECTION, "the charts", out / "mlflow-charts.png")
    scrolled_to(driver, SECTION, "result", out / "mlflow-charts-results.png")


def every_trial(driver, sweep: Sweep, out: Path) -> None:
    """The ungrouped view's charts: a dot per seed, then the parallel coordinates."""
    shoot(driver, sweep.trials, CARD, "the charts of every trial", out / "mlflow-charts-trials.png")
    strip = wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, CARD), "the dot per seed")[0]
    scroll_below(driver, strip)
    wait_for(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".parcoords .label"), "the parallel coordinates")
    save(driver, out / "mlflow-charts-parallel.png", SETTLE_S * 2)


def parent_run(driver, sweep: Sweep, out: Path) -> None:
    """The parent's description folded (the verdict first), its figures below "Show more", the translations page."""
    page = f"{sweep.runs}/{sweep.parent}?workflowType=machine_learning"
    shoot(driver, page, DESCRIPTION, "the parent's description", out / "mlflow-parent.png")
    for button in driver.find_elements(By.XPATH, "//*[text()='Show more']"):
        button.click()  # the whole description, its figures below the table
    figure = driver.find_elements(By.CSS_SELECTOR, f"{DESCRIPTION} img")[0]
    driver.execute_script("arguments[0].scrollIntoView()", figure)
    save(driver, out / "mlflow-parent-figure.png")
    artifact = f"{sweep.runs}/{sweep.parent}/artifacts/summary/translations.html?workflowType=machine_learning"
    page = out / "mlflow-translations-page.png"
    shoot(driver, artifact, "iframe.mlflow-html-iframe", "the translations page", page, text=False)


def translations(driver, sweep: Sweep, out: Path) -> None:
    """A trial's translations table; the trials' translations side by side in the evaluation view, with
    `reference` picked in its "Group by" (one pick), so that each row shows source, reference and hypotheses."""
    table = f"{sweep.runs}/{sweep.best}/artifacts/translations/test.json?workflowType=machine_learning"
    shoot(driver, table, "table th, [role='columnheader']", "a translations table", out / "mlflow-translations.png")
    shoot(driver, sweep.translations, COMPARED, "the hypotheses compared", out / "mlflow-translations-compare.png")
    group_also_by(driver, "reference")
    save(driver, out / "mlflow-translations-compare.png")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNGs (default: beside this script)")
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory() as tmp:
        server = MlflowServer(Path(tmp))
        try:
            sweep = run_sweep(Path(tmp), server.uri)
            with chromium(*WINDOW) as driver:
                assistant_seen(driver, sweep.link)
                for shots in (comparison, every_trial, parent_run, translations):
                    shots(driver, sweep, out)
        finally:
            server.stop()


if __name__ == "__main__":
    main()
