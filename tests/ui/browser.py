"""Headless Chromium for the dashboard tests: Debian's /usr/bin/chromium driven through
/usr/bin/chromedriver (installed by scripts/ensure-chromium.sh; never a downloaded browser)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service

from harness.poll import wait_until

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
T = TypeVar("T")


def missing_browser() -> str | None:
    """Why the browser cannot run here, or None."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing:
        return f"{', '.join(missing)} missing: run scripts/ensure-chromium.sh (`make test` does)"
    return None


def start_chromium(download_dir: Path, width: int = 1200, height: int = 900) -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
        "--lang=en-US",
        "--no-first-run",
    ):
        options.add_argument(arg)
    options.add_experimental_option(
        "prefs",
        {
            "download.default_directory": str(download_dir),
            "download.prompt_for_download": False,
        },
    )
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: Selenium Manager never runs, so nothing is downloaded.
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(download_dir)})
    return driver


def unexpected_errors(driver: webdriver.Chrome) -> list[dict]:
    """The browser console's errors, but those the dashboard causes on purpose: a rejected key
    (401) and the admin-only API asked with another key (403 of /v1/organization/...: the nav's
    check for an admin key, the Usage page)."""
    return [
        e
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE"
        and "Incorrect" not in e["message"]
        and "status of 401" not in e["message"]
        and not ("/v1/organization/" in e["message"] and "status of 403" in e["message"])
    ]


def eventually(
    probe: Callable[[], T | None], timeout: float = 30, interval: float = 0.1, what: str | Callable[[], str] = ""
) -> T:
    """The one bounded poll (harness.poll.wait_until) over a page that re-renders: a probe that
    finds its element stale or not there yet counts as not yet, and the last such error is told."""
    last_error: list[Exception] = []

    def tolerant() -> T | None:
        try:
            return probe()
        except (StaleElementReferenceException, WebDriverException) as exc:
            last_error[:] = [exc]
            return None

    def told() -> str:
        return f"{(what() if callable(what) else what) or probe}: {last_error[-1:]!r}"

    return wait_until(tolerant, timeout, told, interval)


# The click runs in a task of its own, after the script has returned: a click that opens a confirm
# dialog would otherwise hold the script open. Find and click are one task, so no redraw comes between.
_CLICK_IN_PAGE = """
const css = arguments[0];
if (!document.querySelector(css)) return false;
setTimeout(() => document.querySelector(css)?.click(), 0);
return true;
"""


def click_in_page(browser, css: str) -> None:
    """Clicks inside the page: list rows are redrawn every second, and on a loaded host a find and a
    click sent as two WebDriver calls can lose to every redraw for 30 s."""
    eventually(lambda: browser.execute_script(_CLICK_IN_PAGE, css), what=css)
