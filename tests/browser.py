"""Debian's headless Chromium driven by Selenium, for what a researcher sees in MLflow's UI (the browser test,
docs/screenshots/make_screenshots.py). Nothing is downloaded: the browser and its driver are the system's
(.ci/run installs `chromium chromium-driver`), so Selenium Manager never runs."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webdriver import WebDriver

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
WAIT_S = 60.0  # MLflow's UI on a loaded 2-core machine: its bundle, then each chart's data
T = TypeVar("T")


def have_chromium() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


@contextmanager
def chromium(width: int = 1600, height: int = 1000) -> Iterator[WebDriver]:
    """A fresh headless browser (no saved UI state: what a colleague opening the link sees); `--no-sandbox`: CI
    runs as root."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={width},{height}"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(driver: WebDriver, found: Callable[[WebDriver], T], what: str) -> T:
    """`found`'s first truthy answer within WAIT_S (the page re-renders: an element may go stale meanwhile)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if answer := found(driver):
                return answer
        except (NoSuchElementException, StaleElementReferenceException):
            pass
        time.sleep(0.5)
    seen = driver.find_element(By.TAG_NAME, "body").text[:2000]
    raise AssertionError(
        f"MLflow's UI did not show {what} within {WAIT_S:.0f} s at {driver.current_url}; it shows:\n{seen}"
    )


def texts(driver: WebDriver, css: str) -> list[str]:
    """The visible text of every element matching `css`."""
    return [element.text.strip() for element in driver.find_elements(By.CSS_SELECTOR, css)]


# MLflow 3.17 opens its assistant panel (a third of the window) once per browser profile, on the first page it shows
# under localhost, 127.0.0.1 or ::1; these localStorage entries (its useLocalStorage keys, `<key>_v1`, JSON) say it
# opened once and was closed. No link or tag does it: a researcher closes it once (docs/operations.md)
ASSISTANT_SEEN = {"mlflow.assistant.fab.autoOpenedOnFirstLoad_v1": "true", "mlflow.assistant.panelOpen_v1": "false"}


def assistant_seen(driver: WebDriver, link: str) -> None:
    """A fresh profile that has seen and closed MLflow's assistant once, on the origin of `link`: its entries are
    written on a page of that origin that is not the UI (`/version`), before the UI ever loads."""
    driver.get(link.split("/#/")[0].rstrip("/") + "/version")
    for key, value in ASSISTANT_SEEN.items():
        driver.execute_script("window.localStorage.setItem(arguments[0], arguments[1])", key, value)


def on_screen(driver: WebDriver, element, partly: bool = False) -> bool:
    """Whether `element` lies inside the window, unscrolled, what a researcher sees without scrolling: wholly, or
    `partly` (its top on the screen, across its width)."""
    script = (
        "const r = arguments[0].getBoundingClientRect();"
        "return r.width > 0 && r.left >= 0 && r.top >= 0 && r.right <= innerWidth"
        " && (arguments[1] ? r.top < innerHeight : r.bottom <= innerHeight);"
    )
    return bool(driver.execute_script(script, element, partly))


def scroll_below(driver: WebDriver, element) -> None:
    """Scroll the nearest scrolled area holding `element` (MLflow's charts) to just below it."""
    script = (
        "let area = arguments[0].parentElement;"
        "const scrolls = (a) => a.scrollHeight > a.clientHeight && /auto|scroll/.test(getComputedStyle(a).overflowY);"
        "while (area && !scrolls(area)) area = area.parentElement;"
        "if (area) area.scrollBy(0, arguments[0].getBoundingClientRect().bottom - area.getBoundingClientRect().top);"
    )
    driver.execute_script(script, element)


def react_prop_length(driver: WebDriver, element, prop: str) -> int | None:
    """The length of the array prop `prop` of the nearest React component above `element` that has one: what a
    chart was handed to draw (MLflow's parallel coordinates draw on a canvas, whose lines the DOM does not hold)."""
    script = (
        "let node = arguments[0], key = Object.keys(node).find(k => k.startsWith('__reactFiber$'));"
        "for (let fiber = node[key]; fiber; fiber = fiber.return) {"
        "  const props = fiber.memoizedProps;"
        "  if (props && Array.isArray(props[arguments[1]])) return props[arguments[1]].length; }"
        "return null;"
    )
    return driver.execute_script(script, element, prop)


def close_assistant(driver: WebDriver) -> None:
    """MLflow 3.17 opens its "MLflow Assistant" beside every page of a browser that never closed it: closed, the
    page gets the window's width (it is per-browser state, not the sweep's view)."""
    for button in driver.find_elements(By.CSS_SELECTOR, "button[aria-label='Close']"):
        if button.is_displayed():
            button.click()
            return


# MLflow 3.17's evaluation view (EvaluationArtifactCompareView): its "Compare" picker showing the hypothesis column,
# its "Group by" picker, a picker's options, a table cell (its `col-id` a column's name, or a run's id)
COMPARED = "[aria-label='Dialog Combobox, selected option: hypothesis']"
GROUP_BY = "[aria-label='Select \"group by\" columns']"
OPTION, CELL = "[role='option']", "[role='gridcell']"


def group_also_by(driver: WebDriver, column: str) -> None:
    """Pick one more column in the evaluation view's "Group by" (a researcher's one pick), then close the picker."""
    driver.find_element(By.CSS_SELECTOR, GROUP_BY).click()
    options = wait_for(
        driver, lambda d: [o for o in d.find_elements(By.CSS_SELECTOR, OPTION) if o.text == column], f"`{column}`"
    )
    options[0].click()
    driver.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
