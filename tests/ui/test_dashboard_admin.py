"""An admin's Projects and Audit log pages in a real headless Chromium against a real `batchd
serve` whose model is a fake upstream fleet (no engine): a project made on the page, its key
(shown once) working with the openai client until the project is archived on the page, a limit
and model access set there, each change as the Administration API reads it and on the audit log."""

from __future__ import annotations

import openai
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness.client import openai_client
from harness.fake_fleet import FakeFleet, upstream_config
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, chat_line, create, wait_for
from tests.ui.browser import click_in_page, eventually, missing_browser, start_chromium, unexpected_errors

# The page is the same whatever the database; the API under it is tested on both.
pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

ADMIN_KEY = "admin-ui-key"
PROJECT_KEY = "key-a"  # a config key of proj-a: not an admin


@pytest.fixture(scope="module")
def server(start_server, tmp_path_factory):
    logs = tmp_path_factory.mktemp("admin-ui-fleet")
    fleet = FakeFleet(logs, max_concurrency=8).start()
    config = upstream_config(
        logs / "models.json", {CHAT_MODEL: {"urls": fleet.urls, "model": fleet.model, "max_concurrency": 8}}
    )
    env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_ADMIN_KEYS": ADMIN_KEY}
    yield start_server(env, models=True, args=["--config", str(config)])
    fleet.stop()


@pytest.fixture(scope="module")
def org(server):
    return openai_client(server.base_url, "unused", admin_api_key=ADMIN_KEY).admin.organization


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    driver = start_chromium(tmp_path_factory.mktemp("admin-ui-downloads"))
    driver.implicitly_wait(0)
    driver.ui = f"http://127.0.0.1:{server.port}/ui"
    driver.get(driver.ui)
    _sign_in(driver, ADMIN_KEY)
    yield driver
    severe = unexpected_errors(driver)
    driver.quit()
    assert not severe, severe


def _sign_in(browser, key: str) -> None:
    browser.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", key)


def _go(browser, fragment: str) -> None:
    url = f"{browser.ui}#{fragment}"
    if browser.current_url == url:
        browser.refresh()
    else:
        browser.get(url)


_ADMIN_LINKS = (
    "return [...document.querySelectorAll('nav a[data-admin]')].filter((a) => !a.hidden).map((a) => a.dataset.page);"
)


def test_the_nav_offers_the_admin_pages_to_admin_keys_only(browser):
    _go(browser, "/batches")
    eventually(lambda: browser.execute_script(_ADMIN_LINKS) == ["usage", "projects", "audit"], what="admin links")
    _sign_in(browser, PROJECT_KEY)
    try:
        _go(browser, "/files")
        eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "#files table, #files p"), what="the files page")
        eventually(lambda: browser.execute_script(_ADMIN_LINKS) == [], what="no admin links for a project key")
        _go(browser, "/projects")  # typed in: the API's 403 in words
        eventually(lambda: "admin API key" in browser.find_element(By.ID, "projects").text, what="the 403")
    finally:
        _sign_in(browser, ADMIN_KEY)


def _text(browser, css: str) -> str | None:
    return browser.execute_script("const el = document.querySelector(arguments[0]); return el && el.innerText;", css)


def _value(browser, css: str) -> str | None:
    return browser.execute_script("const el = document.querySelector(arguments[0]); return el && el.value;", css)


def _fill(browser, css: str, value: str) -> None:
    field = eventually(lambda: browser.find_element(By.CSS_SELECTOR, css), what=css)
    field.clear()
    field.send_keys(value)


def _notice(browser, text: str) -> None:
    eventually(lambda: text in (_text(browser, "#project-message") or ""), what=f"the notice {text!r}")


_AUDIT_ROWS = """return [...document.querySelectorAll('#audit tr[data-event-id]')]
  .map((row) => [row.dataset.eventId, row.dataset.type]);"""


def _audit_shown(browser) -> list[list[str]]:
    return browser.execute_script(_AUDIT_ROWS)


def _api_audit(org, **filters) -> list[list[str]]:
    return [[e.id, e.type] for e in org.audit_logs.list(limit=20, **filters).data]


def test_an_admin_runs_a_project_from_the_page_and_sees_each_change_audited(browser, server, org):
    # Create a project.
    _go(browser, "/projects")
    _fill(browser, "#new-project-name", "Team Green")
    click_in_page(browser, "#new-project-form button[type=submit]")
    project_id = eventually(
        lambda: browser.execute_script(
            "return document.querySelector('#project[data-status=active]')?.dataset.projectId"
        ),
        what="the new project's page",
    )
    assert project_id.startswith("proj_") and browser.current_url.endswith(f"#/project/{project_id}")
    assert org.projects.retrieve(project_id).name == "Team Green"

    # A key, shown once, that works with the openai client at once.
    _fill(browser, "#new-key-name", "green-runner")
    click_in_page(browser, "#new-key-form button[type=submit]")
    value = eventually(lambda: _value(browser, "#new-key-value"), what="the new key's value")
    [listed] = org.projects.api_keys.list(project_id).data
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, f'#keys tr[data-key-id="{listed.id}"]'), what="its row")
    assert value not in browser.find_element(By.ID, "keys").text and listed.redacted_value in _text(browser, "#keys")
    team = openai_client(server.base_url, value)
    done = wait_for(team, create(team, [chat_line(f"g-{n}") for n in range(2)]).id, timeout=60)
    assert done.status == "completed" and done.request_counts.completed == 2
    browser.refresh()
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "#keys tr[data-key-id]"), what="the page again")
    assert not browser.find_elements(By.ID, "new-key-value")  # shown once

    # A daily request limit: two lines ran today, so the next batch of one is refused.
    row = f'#limits tr[data-model="{CHAT_MODEL}"]'
    _fill(browser, f'{row} input[name="max_requests_per_1_day"]', "2")
    click_in_page(browser, f"{row} button.save-limit")
    _notice(browser, f"Saved the limits of {CHAT_MODEL}")
    [limit] = org.projects.rate_limits.list_rate_limits(project_id).data
    assert (limit.max_requests_per_1_day, limit.batch_1_day_max_input_tokens) == (2, None)
    refused = wait_for(team, create(team, [chat_line("over")]).id, timeout=60)
    assert refused.status == "failed" and refused.errors.data[0].code == "request_limit_exceeded"

    # Batchd's weight, and model access: an allow list of none.
    _fill(browser, "#project-weight", "3")
    click_in_page(browser, "#scheduling-form button[type=submit]")
    _notice(browser, "Saved the weight")
    assert org.projects.rate_limits.list_rate_limits(project_id).data[0].model_extra["weight"] == 3
    eventually(lambda: browser.find_elements(By.ID, "models-mode"), what="the model access form")
    Select(browser.find_element(By.ID, "models-mode")).select_by_value("allow_list")
    click_in_page(browser, "#models-form button[type=submit]")
    _notice(browser, "Saved the model access")
    permissions = org.projects.model_permissions.retrieve(project_id)
    assert (permissions.mode, permissions.api_model_ids) == ("allow_list", [])

    # Archive: the key is refused from the next request.
    click_in_page(browser, "#archive-project")
    eventually(lambda: browser.switch_to.alert, what="the confirm dialog").accept()
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, "#project[data-status=archived]"), what="archived")
    assert org.projects.retrieve(project_id).status == "archived"
    with pytest.raises(openai.AuthenticationError):
        team.files.list()

    # Every change on the audit log page, as the API lists it; filtered by type.
    want_types = [
        "project.archived",
        "project.updated",
        "rate_limit.updated",
        "rate_limit.updated",
        "api_key.created",
        "service_account.created",
        "project.created",
    ]
    assert [t for _, t in _api_audit(org, project_ids=[project_id])] == want_types
    _go(browser, "/audit")
    eventually(lambda: _audit_shown(browser) == _api_audit(org), what="the newest events, as the API lists them")
    assert [t for _, t in _audit_shown(browser)][: len(want_types)] == want_types
    Select(browser.find_element(By.ID, "audit-type")).select_by_value("rate_limit.updated")
    eventually(lambda: browser.current_url.endswith("#/audit?type=rate_limit.updated"), what="the type filter")
    eventually(
        lambda: _audit_shown(browser) == _api_audit(org, event_types=["rate_limit.updated"]),
        what="rate limit updates only",
    )


def test_the_audit_log_pages_with_the_after_cursor(browser, org):
    for n in range(21):
        org.projects.create(name=f"Paging {n}")
    _go(browser, "/audit")
    first = eventually(lambda: (shown := _audit_shown(browser)) == _api_audit(org) and shown, what="the first page")
    assert len(first) == 20
    click_in_page(browser, "#audit-older")
    eventually(
        lambda: _audit_shown(browser) == _api_audit(org, after=first[-1][0]),
        what="the next page, from the last event shown",
    )
    assert browser.current_url.endswith(f"#/audit?after={first[-1][0]}")
