"""The dashboard in a real headless Chromium against a real `batchd serve` running the built-in
models: sign in, watch a batch run to completion, cancel one, download and upload files, quote
and create a batch."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import openai
import pytest
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from harness.client import openai_client
from harness.poll import wait_until
from harness.server import BATCHD
from tests.support.batches import CHAT_MODEL, cancel_in_cleanup, chat_line, create, jsonl, upload, wait_for
from tests.ui.browser import click_in_page, eventually, missing_browser, start_chromium, unexpected_errors

# The page is the same whatever the database; one backend is enough for the browser (the API
# under it is tested on both). Same param value as the shared fixture: its servers are reused.
pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

KEY = "key-a"
# With BATCHD_SCREENSHOT_DIR set, each main page is saved there as dashboard-<page>.png once its
# test has checked it (the docs' pictures: BATCHD_SCREENSHOT_DIR=docs, docs/dashboard.md).
SCREENSHOT_DIR = os.environ.get("BATCHD_SCREENSHOT_DIR")


@pytest.fixture(scope="module")
def downloads(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def browser(model_server, downloads):
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    driver = start_chromium(downloads)
    driver.implicitly_wait(0)
    ui = f"http://127.0.0.1:{model_server.port}/ui"
    driver.get(ui)
    key = eventually(lambda: driver.find_element(By.ID, "signin-key"), what="the sign-in form")
    key.send_keys("not-a-key")
    driver.find_element(By.ID, "signin-submit").click()
    eventually(lambda: "Incorrect API key" in driver.find_element(By.ID, "signin-message").text, what="rejection")
    key.clear()
    key.send_keys(KEY)
    driver.find_element(By.ID, "signin-submit").click()
    eventually(lambda: driver.find_element(By.ID, "batches"), what="the batches page")
    assert driver.execute_script("return sessionStorage.getItem('batchd.apiKey')") == KEY
    driver.ui = ui
    yield driver
    severe = unexpected_errors(driver)
    driver.quit()
    assert not severe, severe


def _go(browser, fragment: str) -> None:
    browser.get(f"{browser.ui}#{fragment}")


def _shown(browser, css: str) -> tuple[str, int] | None:
    """(status, lines done) as the element at `css` (a batch row or page) shows them."""
    found = browser.find_elements(By.CSS_SELECTOR, css)
    if not found:
        return None
    bar = found[0].find_element(By.CSS_SELECTOR, '[role="progressbar"]')
    return found[0].get_attribute("data-status"), int(bar.get_attribute("aria-valuenow"))


def _row_state(browser, batch_id: str) -> tuple[str, int] | None:
    return _shown(browser, f'tr[data-batch-id="{batch_id}"]')


def _page_state(browser, batch_id: str) -> tuple[str, int] | None:
    return _shown(browser, f'#batch[data-batch-id="{batch_id}"]')


def _watch(browser, state, batch_id: str, until, timeout: float = 180) -> list[tuple[str, int]]:
    """Every distinct (status, lines done) the page shows until `until(status, done)`."""
    seen: list[tuple[str, int]] = []
    last_error: Exception | None = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            current = state(browser, batch_id)
        except (StaleElementReferenceException, NoSuchElementException) as exc:  # re-rendered between find and read
            current, last_error = None, exc
        if current and (not seen or seen[-1] != current):
            seen.append(current)
        if current and until(*current):
            return seen
        time.sleep(0.05)
    raise TimeoutError(f"{batch_id}: page showed {seen}; last re-render: {last_error!r}")


def _run_and_watch(browser, client, lines: int):
    """Creates a batch and follows it on the list, then on its page, until it completes."""
    # 64 tokens a line, never stopped early: on a quiet machine the tiny model runs a 1,500-line
    # batch of short answers between two refreshes.
    batch = create(
        client, [chat_line(f"ui-{i}", f"dashboard line {i}", max_tokens=64, ignore_eos=True) for i in range(lines)]
    )
    assert batch.status == "validating"
    _go(browser, "/batches")
    on_list = _watch(browser, _row_state, batch.id, lambda status, done: status == "completed" or done > 0)
    click_in_page(browser, f'a[href="#/batch/{batch.id}"]')
    on_page = _watch(browser, _page_state, batch.id, lambda status, done: status == "completed")
    return batch, on_list + on_page


def test_batch_runs_to_completed_with_moving_progress_and_output_download(browser, model_client, downloads):
    # The engine's speed here varies tenfold with the machine's load: when a batch finishes
    # between two of the page's one-second refreshes, a larger one is run.
    for lines in (250, 3000):
        batch, seen = _run_and_watch(browser, model_client, lines)
        if len({done for _, done in seen if 0 < done < lines}) >= 2:  # the bar moved while watched
            break
    statuses = [status for status, _ in seen]
    done_values = sorted({done for _, done in seen})
    assert statuses[0] in ("validating", "in_progress") and statuses[-1] == "completed", seen
    assert any(0 < done < lines for done in done_values), f"the bar never showed partial progress: {seen}"
    assert len(done_values) >= 3 and done_values[-1] == lines, seen
    # The timeline shows every step from creation (validating) to completion.
    steps = [li.get_attribute("data-step") for li in browser.find_elements(By.CSS_SELECTOR, "#timeline li[data-step]")]
    assert steps == ["created_at", "in_progress_at", "finalizing_at", "completed_at"]
    assert browser.find_elements(By.CSS_SELECTOR, "svg.chart polyline"), "no throughput line drawn"

    done = model_client.batches.retrieve(batch.id)
    expected = model_client.files.content(done.output_file_id).content
    click_in_page(browser, 'button[data-download="output"]')
    target = downloads / f"{batch.id}_output.jsonl"
    eventually(lambda: target.exists() and target.stat().st_size == len(expected), what=str(target))
    assert target.read_bytes() == expected
    assert not browser.find_element(By.ID, "cancel-batch").is_displayed()  # nothing to cancel once finished
    _picture(browser, "batch")


def _picture(browser, page: str) -> None:
    """The page as it is now, for the docs, when BATCHD_SCREENSHOT_DIR asks for pictures."""
    if not SCREENSHOT_DIR:
        return
    path = Path(SCREENSHOT_DIR) / f"dashboard-{page}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.execute_script("window.scrollTo(0, 0)")
    browser.save_screenshot(str(path))


LINES_TO_CANCEL = 3000  # the model server's BATCHD_MAX_BATCH_LINES


def test_cancel_a_running_batch_from_its_page(browser, model_client):
    # CI at 640e910 once saw 1,500 lines end while the page loaded on a loaded host (the cancel
    # got 409): the most lines the model server takes (6,000 failed too_many_tasks).
    batch = create(
        model_client,
        [chat_line(f"c-{i}", f"cancel me {i}", max_tokens=64, ignore_eos=True) for i in range(LINES_TO_CANCEL)],
    )
    wait_for(model_client, batch.id, statuses={"in_progress"}, timeout=60)
    _go(browser, f"/batch/{batch.id}")
    click_in_page(browser, "#cancel-batch:not([hidden])")
    eventually(lambda: browser.switch_to.alert, what="the confirm dialog").accept()
    eventually(
        lambda: model_client.batches.retrieve(batch.id).status in ("cancelling", "cancelled"),
        what="cancelling via the API",
    )
    final = wait_for(model_client, batch.id, timeout=60)
    assert final.status == "cancelled"
    assert final.request_counts.completed < LINES_TO_CANCEL  # the rest count as failed (batch_cancelled)
    eventually(
        lambda: _page_state(browser, batch.id) and _page_state(browser, batch.id)[0] == "cancelled",
        what="the page showing cancelled",
    )
    assert not browser.find_element(By.ID, "cancel-batch").is_displayed()
    # Lines/s counts the lines that ran until the cancel, not the never-run ones it failed.
    _go(browser, "/batches")
    shown = _rate(eventually(lambda: _rate_text(browser, batch.id), what="the cancelled batch's lines/s"))
    elapsed = final.cancelling_at - final.in_progress_at
    if elapsed >= 1:
        assert shown == pytest.approx(final.request_counts.completed / elapsed, rel=0.01, abs=0.01), (shown, final)


def _rate_text(browser, batch_id: str) -> str:
    """The row's lines/s as shown, "" until the row is there (text, so that "0.00" is an answer)."""
    cells = browser.find_elements(By.CSS_SELECTOR, f'tr[data-batch-id="{batch_id}"] td')
    return cells[3].text.replace(",", "") if len(cells) > 3 else ""


def _rate(text: str) -> float:
    return float("nan") if text == "—" else float(text)


def test_upload_by_picker_then_download_and_delete(browser, model_client, tmp_path, downloads):
    data = b"notes from the dashboard test\n" * 10
    path = tmp_path / "dashboard-notes.txt"
    path.write_bytes(data)
    _go(browser, "/files")
    Select(eventually(lambda: browser.find_element(By.ID, "upload-purpose"), what="purpose")).select_by_value(
        "user_data"
    )
    browser.find_element(By.ID, "upload-input").send_keys(str(path))
    status = eventually(
        lambda: (
            "Uploaded" in browser.find_element(By.ID, "upload-status").text
            and browser.find_element(By.ID, "upload-status").text
        ),
        what="upload status",
    )
    file_id = status.split(" as ")[1].rstrip(".")
    stored = model_client.files.retrieve(file_id)
    assert (stored.filename, stored.purpose, stored.bytes) == ("dashboard-notes.txt", "user_data", len(data))
    assert model_client.files.content(file_id).content == data
    _picture(browser, "files")

    click_in_page(browser, f'tr[data-file-id="{file_id}"] button.download')
    target = downloads / "dashboard-notes.txt"
    eventually(lambda: target.exists() and target.read_bytes() == data, what="the downloaded copy")

    click_in_page(browser, f'tr[data-file-id="{file_id}"] button.delete')
    eventually(lambda: browser.switch_to.alert, what="the confirm dialog").accept()
    eventually(lambda: not browser.find_elements(By.CSS_SELECTOR, f'tr[data-file-id="{file_id}"]'), what="row gone")
    with pytest.raises(openai.NotFoundError):
        model_client.files.retrieve(file_id)


# Read in one script: the page re-renders its table every 2 s, which stales found elements.
_MODEL_ROWS = """return [...document.querySelectorAll('tr[data-model-id]')].map((row) => [
  row.dataset.modelId,
  row.querySelector('span.badge').className,
  row.querySelector('span.badge').textContent,
  row.querySelector('td.in-flight').textContent,
]);"""


def test_models_page_shows_each_engine(browser, model_client):
    """One row per served model (the LoRA adapter `tl` too), no other, each with its engine's
    state badge and its capacity."""
    models = {m.id: m for m in model_client.models.list()}
    assert len(models) == 3, models
    _go(browser, "/models")
    rows = eventually(lambda: browser.execute_script(_MODEL_ROWS), what="the model rows")
    assert sorted(rows) == sorted(
        [model_id, "badge engine-ready", "ready", f"0 / {model.max_lines_in_flight:,}"]
        for model_id, model in models.items()
    )
    _picture(browser, "models")


def test_projects_see_only_their_own_batches(browser, model_server, model_client):
    other = openai_client(model_server.base_url, "key-b")
    theirs = create(other, [chat_line("b-1")])
    mine = create(model_client, [chat_line("a-1")])
    _go(browser, "/batches")
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, f'tr[data-batch-id="{mine.id}"]'), what="own batch")
    assert not browser.find_elements(By.CSS_SELECTOR, f'tr[data-batch-id="{theirs.id}"]')
    _picture(browser, "batches")
    # Their batch exists and is listed for their own key: only the project keeps it off this page.
    assert theirs.id in [b.id for b in other.batches.list()]
    with pytest.raises(openai.NotFoundError):
        model_client.batches.retrieve(theirs.id)


def _admin_key(server) -> str:
    cmd = [str(BATCHD), "keys", "create", "--project", "ops", "--admin", "--data-dir", str(server.data_dir)]
    if server.database_url:
        cmd += ["--database-url", server.database_url]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120).stdout.strip()


def _cells(browser, css: str) -> dict[str, str]:
    """Row id -> its Project cell, for the rows at `css` (tr elements with a data-* id)."""
    rows = browser.execute_script(
        "return [...document.querySelectorAll(arguments[0])].map("
        "r => [r.dataset.batchId || r.dataset.fileId, r.querySelector('td.project')?.innerText])",
        css,
    )
    return dict(rows)


def test_admin_sees_every_projects_batches_and_files_with_a_project_filter(browser, model_server, model_client):
    other = openai_client(model_server.base_url, "key-b")
    theirs = wait_for(other, create(other, [chat_line("adm-b", max_tokens=2)]).id)
    mine = create(model_client, [chat_line("adm-a", max_tokens=2)])
    admin_key = _admin_key(model_server)
    browser.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", admin_key)
    try:
        _go(browser, "/batches")
        rows = "#batches tr[data-batch-id]"
        eventually(
            lambda: {mine.id: "proj-a", theirs.id: "proj-b"}.items() <= _cells(browser, rows).items(),
            what="both projects' batches, each with its project",
        )
        Select(browser.find_element(By.ID, "project-filter")).select_by_value("proj-b")
        eventually(lambda: browser.current_url.endswith("#/batches?project=proj-b"), what="the proj-b filter")
        eventually(
            lambda: (shown := _cells(browser, rows)) and set(shown.values()) == {"proj-b"} and theirs.id in shown,
            what="proj-b's batches only",
        )
        # Another project's batch opens, with its files, through the same parameter.
        click_in_page(browser, f'tr[data-batch-id="{theirs.id}"] a')
        eventually(lambda: _page_state(browser, theirs.id) == ("completed", 1), what="their batch's page")
        eventually(lambda: browser.find_elements(By.CSS_SELECTOR, '[data-download="output"]'), what="its output file")

        _go(browser, "/files")
        eventually(
            lambda: _cells(browser, "#files tr[data-file-id]").get(theirs.input_file_id) == "proj-b",
            what="their input file with its project",
        )
    finally:
        browser.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", KEY)
        _go(browser, "/batches")
    # A project key keeps OpenAI's meaning of the lists, and may not name another project.
    assert theirs.id not in [b.id for b in model_client.batches.list()]
    with pytest.raises(openai.PermissionDeniedError):
        model_client.batches.list(extra_query={"project": "proj-b"})


def test_usage_page_charts_tokens_per_project_for_admin_keys(browser, model_server, model_client):
    _go(browser, "/usage")
    eventually(lambda: browser.find_elements(By.ID, "usage-forbidden"), what="the admin-only notice for key-a")
    done = wait_for(model_client, create(model_client, [chat_line(f"u-{i}", max_tokens=4) for i in range(5)]).id)
    assert done.status == "completed"
    admin_key = _admin_key(model_server)
    admin = openai_client(model_server.base_url, admin_key)
    browser.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", admin_key)
    try:
        _go(browser, "/usage")
        eventually(lambda: browser.find_elements(By.ID, "usage-table"), what="the usage table")
        Select(browser.find_element(By.ID, "usage-range")).select_by_value("hour")
        eventually(lambda: browser.current_url.endswith("#/usage?range=hour"), what="the hour range")

        def shown_equals_api() -> bool:
            now = int(time.time())
            page = admin.get(
                "/organization/usage/completions",
                cast_to=object,
                options={
                    "params": {
                        "start_time": now // 60 * 60 - 59 * 60,
                        "bucket_width": "1m",
                        "limit": 60,
                        "group_by": ["project_id", "model"],
                    }
                },
            )
            want = sum(
                r["num_model_requests"]
                for b in page["data"]
                for r in b["results"]
                if (r["project_id"], r["model"]) == ("proj-a", "batchd-tiny-chat")
            )
            rows = browser.find_elements(By.CSS_SELECTOR, '#usage-table tr[data-project="proj-a"]')
            shown = [
                int(r.get_attribute("data-requests"))
                for r in rows
                if r.get_attribute("data-model") == "batchd-tiny-chat"
            ]
            return want >= 5 and shown == [want]

        eventually(shown_equals_api, what="the page's proj-a requests equal the Usage API's")
        assert browser.find_elements(By.CSS_SELECTOR, '#usage-chart polyline[data-series="proj-a"]')
        _picture(browser, "usage")
    finally:
        browser.execute_script("sessionStorage.setItem('batchd.apiKey', arguments[0])", KEY)
        _go(browser, "/batches")


_TEXT_IN_PAGE = "const el = document.querySelector(arguments[0]); return el ? el.innerText : null;"


def test_queue_page_shows_the_projects_running_batch_with_its_share(browser, model_client):
    # A few short lines end within a few engine steps (the batch counts as running once lines are
    # done); the long ones keep it running. All long, none ended before the first wave of ~256
    # lines had decoded 128 tokens, which took over two minutes on a loaded host (CI at b03dae5).
    # Four waves of them: the batch must still run once an earlier test's cancelled batch has
    # drained and this project's share is the whole model's (CI at 8f38f5d saw 304 lines end
    # first, beside extra load). It is cancelled at the end, so its size costs no time.
    short = [chat_line(f"q-short-{i}", f"queue line {i}", max_tokens=1) for i in range(4)]
    long = [chat_line(f"q-{i}", f"queue line {i}", max_tokens=128, ignore_eos=True) for i in range(1000)]
    batch = create(model_client, short + long)
    try:
        _go(browser, "/batches")
        click_in_page(browser, 'nav a[data-page="queue"]')
        card = 'section.queue-project[data-project="proj-a"]'
        # Read in one script each time: the page redraws every two seconds.
        eventually(
            lambda: browser.execute_script(
                _TEXT_IN_PAGE, f'{card} tr[data-batch-id="{batch.id}"][data-at-risk="false"]'
            ),
            what="the batch on the queue page",
        )
        # Queued until its first lines are done, then running with the whole share: it is alone.
        text = eventually(
            lambda: (
                all(part in (browser.execute_script(_TEXT_IN_PAGE, card) or "") for part in ("share 100%", "running"))
                and browser.execute_script(_TEXT_IN_PAGE, card)
            ),
            what=lambda: (
                f"the project's batch running with the whole share; the card: {browser.execute_script(_TEXT_IN_PAGE, card)!r}"
            ),
            timeout=120,
        )
        assert "weight 1" in text
        _picture(browser, "queue")
    finally:
        cancel_in_cleanup(model_client, batch.id)


# A request row as the Requests page shows it: its data attributes and each cell's text.
_REQUEST_ROW = """const row = document.querySelector(arguments[0]);
if (!row) return null;
return {...row.dataset, cells: [...row.querySelectorAll('td')].map((td) => td.innerText)};"""


def test_requests_page_shows_a_completed_background_response_and_a_flex_call(browser, model_client):
    created = model_client.responses.create(
        model=CHAT_MODEL, input="dashboard request", background=True, max_output_tokens=8
    )
    done = wait_until(
        lambda: (r := model_client.responses.retrieve(created.id)).status in ("completed", "incomplete") and r,
        timeout=180,
        what=f"response {created.id} to end",
        interval=0.2,
    )
    assert done.usage is not None
    model_client.chat.completions.create(
        model=CHAT_MODEL, messages=[{"role": "user", "content": "flex"}], max_tokens=4, service_tier="flex"
    )
    _go(browser, "/batches")
    click_in_page(browser, 'nav a[data-page="requests"]')
    row = eventually(
        lambda: browser.execute_script(_REQUEST_ROW, f'#requests tr[data-request-id="{created.id}"]'),
        what="the background response on the Requests page",
    )
    request, lane, status, model, latency, tokens = row["cells"]
    assert (row["lane"], lane) == ("response", "response")
    assert row["status"] == status.replace(" ", "_") == done.status
    assert created.id in request and "/v1/responses" in request
    assert model == CHAT_MODEL and latency.endswith("s") and "so far" not in latency
    assert tokens == f"{done.usage.total_tokens:,}"
    flex = eventually(
        lambda: browser.execute_script(_REQUEST_ROW, '#requests tr[data-lane="flex"]'),
        what="the flex call on the Requests page",
    )
    assert flex["status"] == "completed" and flex["requestId"].startswith("flex_")
    assert "/v1/chat/completions" in flex["cells"][0] and flex["cells"][3] == CHAT_MODEL
    _picture(browser, "requests")


CHAT = "/v1/chat/completions"
# The quote as the page shows it: data-field -> text, and the window badge's state.
_QUOTE = """const card = document.querySelector('#quote .quote');
if (!card) return null;
const fields = Object.fromEntries([...card.querySelectorAll('dd[data-field]')].map((dd) => [dd.dataset.field, dd.textContent]));
return {fields, feasible: card.dataset.feasible, badge: card.querySelector('#quote-window').textContent};"""
_QUOTE_ERRORS = """return [...document.querySelectorAll('#quote-errors tbody tr')].map(
  (row) => [...row.querySelectorAll('td')].map((td) => td.textContent));"""


def _estimate(client, file_id: str) -> dict:
    body = {"input_file_id": file_id, "endpoint": CHAT, "completion_window": "24h"}
    return client.post("/batches/estimate", body=body, cast_to=object)


def _batches_of(client, file_id: str) -> list:
    return [b for b in client.batches.list(limit=100) if b.input_file_id == file_id]


def _a_measured_rate(client) -> None:
    """Quotes project a finish from the model's rate: a completed chat batch that ran a second
    or more gives it one (an earlier test's may already have)."""
    probe = upload(client, [chat_line("probe")])
    for lines, tokens in ((200, 32), (1500, 64)):
        if _estimate(client, probe.id)["lines_per_second"]:
            return
        batch = create(client, [chat_line(f"rate-{i}", max_tokens=tokens, ignore_eos=True) for i in range(lines)])
        assert wait_for(client, batch.id, timeout=300).status == "completed"
    assert _estimate(client, probe.id)["lines_per_second"], "no rate after two batches"


def _new_batch_form(browser, file_id: str) -> None:
    """The batches page's New batch link, then the uploaded file picked in the form."""
    _go(browser, "/batches")
    click_in_page(browser, "a#new-batch")
    eventually(
        lambda: browser.find_elements(By.CSS_SELECTOR, f'#new-batch-file option[value="{file_id}"]'),
        what="the file in the form's list",
    )
    Select(browser.find_element(By.ID, "new-batch-file")).select_by_value(file_id)
    Select(browser.find_element(By.ID, "new-batch-endpoint")).select_by_value(CHAT)
    assert browser.find_element(By.ID, "new-batch-window").get_attribute("value") == "24h"


def test_quote_before_create_shows_the_lines_tokens_and_finish_and_creates_nothing(browser, model_client, tmp_path):
    _a_measured_rate(model_client)
    lines = [chat_line(f"quote-{i}", f"quote line {i}", max_tokens=8) for i in range(3)]
    path = tmp_path / "quote-me.jsonl"
    path.write_bytes(jsonl(lines))
    _go(browser, "/files")
    Select(eventually(lambda: browser.find_element(By.ID, "upload-purpose"), what="purpose")).select_by_value("batch")
    browser.find_element(By.ID, "upload-input").send_keys(str(path))
    status = eventually(
        lambda: "Uploaded" in (text := browser.find_element(By.ID, "upload-status").text) and text,
        what="upload status",
    )
    file_id = status.split(" as ")[1].rstrip(".")

    _new_batch_form(browser, file_id)
    browser.find_element(By.ID, "get-quote").click()
    shown = eventually(lambda: browser.execute_script(_QUOTE), what="the quote")
    want = _estimate(model_client, file_id)
    fields = shown["fields"]
    assert (fields["model"], fields["lines"]) == (CHAT_MODEL, "3")
    assert fields["input-tokens"] == f"{want['input_tokens']:,}" and want["input_tokens"] > 0
    assert fields["output-tokens"] == "24"  # each line's max_tokens 8
    assert fields["cost"] == "— (the model has no pricing)"
    assert fields["finish"].startswith("20") and "(in " in fields["finish"], fields
    assert fields["start"].startswith("20"), fields
    assert (shown["feasible"], shown["badge"]) == ("true", "fits the window")
    assert _batches_of(model_client, file_id) == []  # the quote created nothing
    _picture(browser, "new-batch")

    browser.find_element(By.ID, "create-batch").click()
    created = eventually(lambda: _batches_of(model_client, file_id), what="the batch created by the form")
    assert len(created) == 1
    batch = created[0]
    assert (batch.endpoint, batch.completion_window) == (CHAT, "24h")
    eventually(lambda: browser.find_elements(By.CSS_SELECTOR, f'#batch[data-batch-id="{batch.id}"]'), what="its page")
    done = wait_for(model_client, batch.id, timeout=120)
    assert (done.status, done.request_counts.total, done.usage.input_tokens) == ("completed", 3, want["input_tokens"])


def test_quote_of_an_invalid_file_shows_its_line_errors_before_create(browser, model_client):
    data = jsonl([chat_line("bad-1")]) + b"{not json\n" + jsonl([chat_line("bad-1")])
    file = upload(model_client, data, name="broken.jsonl")
    _new_batch_form(browser, file.id)
    browser.find_element(By.ID, "get-quote").click()
    rows = eventually(lambda: browser.execute_script(_QUOTE_ERRORS), what="the quote's line errors")
    errors = _estimate(model_client, file.id)["errors"]["data"]
    assert rows == [[str(e["line"]), e["code"], e["param"] or "", e["message"]] for e in errors]
    assert [(row[0], row[1]) for row in rows] == [("2", "invalid_json_line"), ("3", "duplicate_custom_id")]
    assert "would fail validation: 2 line error(s)" in browser.find_element(By.ID, "quote-invalid").text
    assert _batches_of(model_client, file.id) == []
