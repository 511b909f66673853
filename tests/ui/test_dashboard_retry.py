"""The dashboard's batch-list filters, its Retry button and a batch's results as they arrive, in a
real headless Chromium against a real `batchd serve` whose model is a fake upstream fleet that
fails chosen lines (harness/fake_upstream.py): no engine starts."""

from __future__ import annotations

import time

import openai
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from tests.conftest import API_KEYS_ENV
from tests.support.batches import TERMINAL, create, read_lines, wait_for
from tests.support.put_receiver import PutReceiver
from tests.ui.browser import click_in_page, eventually, missing_browser, start_chromium, unexpected_errors

# The page is the same whatever the database; the API under it is tested on both.
pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

KEY = "key-a"
MODEL = "fake"


def _line(custom_id: str, plan: str = "ok", model: str = MODEL) -> dict:
    """A chat line the fleet answers by `plan`: one act per attempt (ok, 400, hold: no answer until
    the request is aborted)."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {
            "model": model,
            "messages": [{"role": "user", "content": f"plan:{plan}#{time.monotonic_ns()}-{custom_id}"}],
            "max_tokens": 4,
        },
    }


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    logs = tmp_path_factory.mktemp("ui-fleet")
    fleet = FakeFleet(logs, delay_ms=10, max_concurrency=8).start()
    config = upstream_config(
        logs / "models.json", {MODEL: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8}}
    )
    env = {
        "BATCHD_API_KEYS": API_KEYS_ENV,
        # Results by reference to the test's PUT receiver, retried fast.
        "BATCHD_OUTBOUND_ALLOW": "127.0.0.1",
        "BATCHD_EXPORT_MAX_ATTEMPTS": "2",
        "BATCHD_EXPORT_RETRY_BASE_SECONDS": "0.2",
        "BATCHD_EXPORT_POLL_SECONDS": "0.1",
    }
    yield start_server(env, models=True, args=["--config", str(config)])
    fleet.stop()


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai_client(server.base_url, KEY)


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    driver = start_chromium(tmp_path_factory.mktemp("ui-downloads"))
    driver.implicitly_wait(0)
    driver.ui = f"http://127.0.0.1:{server.port}/ui"
    driver.get(driver.ui)
    driver.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", KEY)
    driver.get(f"{driver.ui}#/batches")
    eventually(lambda: driver.find_element(By.ID, "batches"), what="the batches page")
    yield driver
    severe = unexpected_errors(driver)  # a project key's 403 from the nav's admin check is expected
    driver.quit()
    assert not severe, severe


@pytest.fixture(scope="module")
def ended(client) -> dict:
    """Three ended batches: every line succeeded (team red), one line failed (team blue), and
    one that failed validation (its model is not served)."""
    batches = {
        "red": create(client, [_line(f"r-{i}") for i in range(3)], metadata={"team": "red"}),
        "blue": create(client, [_line("b-0"), _line("b-1", "400,ok")], metadata={"team": "blue"}),
        "broken": create(client, [_line("x-0", model="nope")]),
    }
    return {name: wait_for(client, batch.id, TERMINAL, timeout=60) for name, batch in batches.items()}


def _go(browser, fragment: str) -> None:
    url = f"{browser.ui}#{fragment}"
    if browser.current_url == url:
        browser.refresh()  # the same address again would not load the page anew
    else:
        browser.get(url)


_LISTED = "return [...document.querySelectorAll('#batches tr[data-batch-id]')].map((row) => row.dataset.batchId);"


def _shows(browser, client: openai.OpenAI, **query) -> list[str]:
    """Waits until the list shows what the API lists for `query`, and returns it."""
    want = [b.id for b in client.batches.list(limit=20, extra_query=query).data]
    eventually(lambda: browser.execute_script(_LISTED) == want, what=f"the list filtered by {query}: {want}")
    return want


def _filter(browser, **fields: str) -> None:
    """Fills the filter form (the other fields emptied) and applies it."""
    form = eventually(lambda: browser.find_element(By.ID, "batch-filters"), what="the filter form")
    Select(form.find_element(By.ID, "filter-status")).select_by_value(fields.pop("status", ""))
    Select(form.find_element(By.ID, "filter-endpoint")).select_by_value(fields.pop("endpoint", ""))
    for name in ("since", "until", "model", "metadata"):
        browser.execute_script(
            "document.getElementById(arguments[0]).value = arguments[1]", f"filter-{name}", fields.pop(name, "")
        )
    assert not fields, fields
    click_in_page(browser, "#filter-apply")


def test_the_batch_list_filters_as_the_api_does(browser, client, ended):
    assert ended["broken"].status == "failed" and ended["red"].status == "completed"
    _go(browser, "/batches")
    assert len(_shows(browser, client)) >= 3
    _filter(browser, status="failed")
    assert _shows(browser, client, status="failed") == [ended["broken"].id]
    assert "status=failed" in browser.current_url  # a filtered list is a link
    _filter(browser, metadata="team=red")
    assert _shows(browser, client, metadata={"team": "red"}) == [ended["red"].id]
    _filter(browser, status="completed,failed,expired,cancelled", model=MODEL)
    assert set(_shows(browser, client, status="completed,failed,expired,cancelled", model=MODEL)) >= {
        ended["red"].id,
        ended["blue"].id,
    }
    _filter(browser, endpoint="/v1/embeddings")
    eventually(lambda: "No batches match" in browser.find_element(By.ID, "batches").text, what="no embeddings")
    # Dates are days: everything was made after 2020-01-01, nothing before its end.
    _filter(browser, since="2020-01-01")
    _shows(browser, client, created_after=0)
    _filter(browser, until="2020-01-01")
    eventually(lambda: "No batches match" in browser.find_element(By.ID, "batches").text, what="none by 2020")
    click_in_page(browser, "#filter-clear")
    _shows(browser, client)


def test_retry_button_runs_the_failed_lines_as_a_new_batch_and_opens_it(browser, client, ended):
    _go(browser, f"/batch/{ended['red'].id}")
    eventually(lambda: browser.find_element(By.ID, "batch").get_attribute("data-status") == "completed", what="red")
    assert not browser.find_element(By.ID, "retry-batch").is_displayed()  # every line succeeded

    blue = ended["blue"]
    _go(browser, f"/batch/{blue.id}")
    click_in_page(browser, "#retry-batch:not([hidden])")
    eventually(lambda: browser.switch_to.alert, what="the confirm dialog").accept()
    new_id = eventually(
        lambda: (
            (page := browser.find_elements(By.CSS_SELECTOR, "#batch[data-batch-id]"))
            and page[0].get_attribute("data-batch-id") != blue.id
            and page[0].get_attribute("data-batch-id")
        ),
        what="the new batch's page",
    )
    assert browser.current_url.endswith(f"#/batch/{new_id}")
    link = eventually(lambda: browser.find_element(By.CSS_SELECTOR, "#retry-of:not([hidden]) a"), what="retry of")
    assert link.text == blue.id
    again = client.get(f"/batches/{new_id}", cast_to=dict)
    assert again["retry_of"] == blue.id and again["metadata"] == {"team": "blue"}
    done = wait_for(client, new_id, timeout=60)
    assert done.status == "completed" and [line["custom_id"] for line in read_lines(client, done.output_file_id)] == [
        "b-1"
    ]


_RESULT_ROWS = """return [...document.querySelectorAll('#results tr[data-custom-id]')]
  .map((row) => [row.dataset.customId, row.dataset.outcome]).sort();"""


def _results(browser) -> tuple[list[list[str]], str | None]:
    panel = browser.find_element(By.ID, "batch-results")
    return browser.execute_script(_RESULT_ROWS), panel.get_attribute("data-incomplete")


def test_results_arrive_on_the_batch_page_filtered_and_searched(browser, client):
    ok = [f"ok-{i}" for i in range(26)]
    lines = [_line(c) for c in ok] + [_line(f"bad-{i}", "400") for i in range(2)]
    lines += [_line(f"held-{i}", "hold") for i in range(2)]  # unanswered until the cancel
    batch = create(client, lines)
    _go(browser, f"/batch/{batch.id}")
    finished = sorted([[c, "succeeded"] for c in ok] + [[f"bad-{i}", "failed"] for i in range(2)])
    eventually(lambda: _results(browser) == (finished, "true"), what="the finished lines, the batch running")

    Select(browser.find_element(By.ID, "results-outcome")).select_by_value("failed")
    eventually(lambda: _results(browser)[0] == [["bad-0", "failed"], ["bad-1", "failed"]], what="failed only")
    Select(browser.find_element(By.ID, "results-outcome")).select_by_value("")
    browser.find_element(By.ID, "results-search").send_keys("ok-7")
    click_in_page(browser, "#results-filters button[type=submit]")
    eventually(lambda: _results(browser)[0] == [["ok-7", "succeeded"]], what="one custom_id")

    client.batches.cancel(batch.id)
    assert wait_for(client, batch.id, timeout=60).status == "cancelled"
    browser.execute_script("document.getElementById('results-search').value = ''")
    Select(browser.find_element(By.ID, "results-outcome")).select_by_value("failed")
    held = [[f"held-{i}", "failed"] for i in range(2)]
    eventually(
        lambda: _results(browser) == (sorted([["bad-0", "failed"], ["bad-1", "failed"], *held]), "false"),
        what="every line once the batch ended, the never-answered ones cancelled",
    )


def _export_shown(browser) -> str:
    found = browser.find_elements(By.ID, "batch-export")
    return found[0].text if found else ""


def test_a_batch_page_shows_its_export_until_it_ends(browser, client):
    """Results by reference: the page shows the export's status, destination, attempts and last
    error, and keeps refreshing while it is pending (the batch ended before it did)."""
    receiver = PutReceiver()
    try:
        receiver.fail_first["/out"] = 1  # the first attempt fails, the second is taken
        batch = create(client, [_line("e-0")], extra_body={"output_urls": {"output": receiver.url("/out")}})
        _go(browser, f"/batch/{batch.id}")
        eventually(lambda: "PUT URLs (output)" in _export_shown(browser), what="the export's destination")
        eventually(lambda: "Status\ncompleted" in _export_shown(browser), what="the export completed")
        assert "Attempts\n2" in _export_shown(browser) and "Last error" not in _export_shown(browser)
        assert receiver.bodies["/out"] == client.files.content(wait_for(client, batch.id).output_file_id).read()

        failing = create(client, [_line("f-0")], extra_body={"output_urls": {"output": receiver.url("/always-fail/x")}})
        _go(browser, f"/batch/{failing.id}")
        eventually(lambda: "Status\nfailed" in _export_shown(browser), what="the export failed")
        assert "Last error\nhttp_status: The output URL answered HTTP 500." in _export_shown(browser)
    finally:
        receiver.close()
