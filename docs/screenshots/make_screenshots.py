"""Redraw the screenshots of docs/operations.md ("Comparing the trials in MLflow"): a small real sweep against a
real `mlflow server`, its printed link opened in Debian's headless Chromium (as the browser test does), one PNG a
view. It lives beside the PNGs it writes; run it from the repository root after an MLflow upgrade or a change of
what a sweep logs, then look at every PNG before committing them:

    python docs/screenshots/make_screenshots.py            # about 3 minutes on 2 cores

Needs the `test` extra (selenium) and Debian's `chromium chromium-driver`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository root: tests.* below

from selenium.webdriver.common.by import By  # noqa: E402

from sweeper.tracking.mlflow_view import SETTINGS_SECTION  # noqa: E402
from tests.browser import COMPARED, chromium, close_assistant, group_also_by, texts, wait_for  # noqa: E402
from tests.e2e.sweeps import LEAN_TRACKING, SPACE, run_watched, write_space  # noqa: E402
from tests.servers import MlflowServer  # noqa: E402

HERE = Path(__file__).resolve().parent
SETTLE_S = 3.0  # after the last awaited element: charts animate, images decode


def run_sweep(folder: Path, uri: str) -> tuple[str, str, str, str, str]:
    """3 variants x 2 seeds, 2 epochs: enough for curves and for groups; returns the printed links (the comparison,
    the translations), the experiment id, the parent run and the best trial's run."""
    space = write_space(
        folder,
        name="screenshots",
        parameters={"attention.temperature": {"grid": ["none", "sact"]}, "attention.sentinel": SPACE["parameters"]
                    ["attention.sentinel"]},
        search={"max_concurrent": 2, "repeats": 2},
        tracking={**LEAN_TRACKING, "plots": "best"},
        **{"base.train": {**SPACE["base"]["train"], "epochs": 2}},
    )  # fmt: skip
    sweep = run_watched(space, folder, uri)
    if sweep.returncode:
        raise SystemExit(f"the sweep failed ({sweep.returncode}):\n{sweep.stdout[-2000:]}{sweep.stderr[-2000:]}")
    link = next(line for line in sweep.stdout.splitlines() if line.startswith("MLflow: ")).removeprefix("MLflow: ")
    translations = next(line for line in sweep.stdout.splitlines() if line.startswith("translations side by side"))
    runs = sweep.client.search_runs([sweep.client.get_experiment_by_name(sweep.name).experiment_id])
    parent = next(run for run in runs if run.data.tags.get("sweeper.role") == "sweep")
    best = parent.data.tags["sweeper.best_run_id"]
    return link, translations.split(": ", 1)[1], parent.info.experiment_id, parent.info.run_id, best


def shoot(driver, url: str, ready: str, what: str, path: Path) -> None:
    """Open `url`, wait until an element matching the CSS `ready` shows text, close the assistant panel, save."""
    driver.get(url)
    wait_for(driver, lambda d: any(texts(d, ready)), what)
    close_assistant(driver)
    time.sleep(SETTLE_S)
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def compare_translations(driver, link: str, path: Path) -> None:
    """The evaluation view of the trials' translations, with `reference` picked in its "Group by" (one pick) so that
    each row shows the source, the reference and every trial's hypothesis."""
    shoot(driver, link, COMPARED, "the hypotheses compared", path)
    group_also_by(driver, "reference")
    time.sleep(SETTLE_S)
    driver.save_screenshot(str(path))
    print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the PNGs (default: beside this script)")
    out = parser.parse_args().out
    with tempfile.TemporaryDirectory() as tmp:
        server = MlflowServer(Path(tmp))
        try:
            link, translations_link, experiment_id, parent, best = run_sweep(Path(tmp), server.uri)
            runs = f"{server.uri}/#/experiments/{experiment_id}/runs"
            with chromium(1920, 1000) as driver:  # wide enough for every column of the runs table
                shoot(driver, link, "[role='row'] [col-id]", "the runs table", out / "mlflow-runs-grouped.png")
                charts = "[data-testid='experiment-view-compare-runs-section-header']"
                shoot(driver, link + "&compareRunsMode=CHART", charts, "the charts", out / "mlflow-charts.png")
                result = next(c for c in driver.find_elements(By.CSS_SELECTOR, charts) if c.text.startswith("result"))
                driver.execute_script("arguments[0].scrollIntoView()", result)
                time.sleep(SETTLE_S * 2)
                driver.save_screenshot(str(out / "mlflow-charts-results.png"))
                print(f"wrote {out / 'mlflow-charts-results.png'}")
                own = SETTINGS_SECTION["name"]  # the parallel coordinates' section, after result's
                section = next(c for c in driver.find_elements(By.CSS_SELECTOR, charts) if c.text.startswith(own))
                driver.execute_script("arguments[0].scrollIntoView()", section)
                time.sleep(SETTLE_S * 2)
                driver.save_screenshot(str(out / "mlflow-charts-parallel.png"))
                print(f"wrote {out / 'mlflow-charts-parallel.png'}")
                description = "[data-testid='note-editor-preview-content']"
                parent_page = f"{runs}/{parent}?workflowType=machine_learning"
                shoot(driver, parent_page, description, "the parent's description", out / "mlflow-parent.png")
                for button in driver.find_elements(By.XPATH, "//*[text()='Show more']"):
                    button.click()  # the whole description, its figures below the table
                figure = driver.find_elements(By.CSS_SELECTOR, f"{description} img")[0]
                driver.execute_script("arguments[0].scrollIntoView()", figure)
                time.sleep(SETTLE_S)
                driver.save_screenshot(str(out / "mlflow-parent-figure.png"))
                print(f"wrote {out / 'mlflow-parent-figure.png'}")
                translations = f"{runs}/{best}/artifacts/translations/test.json?workflowType=machine_learning"
                shoot(driver, translations, "table th, [role='columnheader']", "a translations table",
                      out / "mlflow-translations.png")  # fmt: skip
                compare_translations(driver, translations_link, out / "mlflow-translations-compare.png")
        finally:
            server.stop()


if __name__ == "__main__":
    main()
