"""The dashboard in open mode (no keys): served from the server's own origin, its requests (a
multipart upload and a delete, which carry that `Origin`) pass the open-mode checks that refuse
every other origin and host."""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.ui.browser import click_in_page, eventually, missing_browser, start_chromium, unexpected_errors

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def test_the_dashboard_works_in_open_mode_from_its_own_origin(start_server, tmp_path):
    problem = missing_browser()
    if problem:
        pytest.fail(problem)
    server = start_server()  # no keys: open mode
    root = f"http://127.0.0.1:{server.port}"
    assert httpx.get(f"{root}/v1/files", headers={"Origin": "http://evil.example"}).status_code == 403
    driver = start_chromium(tmp_path / "downloads")
    try:
        driver.implicitly_wait(0)
        driver.get(f"{root}/ui")
        eventually(lambda: driver.find_element(By.ID, "signin-key"), what="the sign-in form").send_keys("anything")
        driver.find_element(By.ID, "signin-submit").click()
        eventually(lambda: driver.find_element(By.ID, "batches"), what="the batches page")
        driver.get(f"{root}/ui#/files")
        path = tmp_path / "open-notes.txt"
        path.write_bytes(b"open mode\n")
        purpose = eventually(lambda: driver.find_element(By.ID, "upload-purpose"), what="purpose")
        Select(purpose).select_by_value("user_data")
        driver.find_element(By.ID, "upload-input").send_keys(str(path))
        status = eventually(
            lambda: "Uploaded" in (text := driver.find_element(By.ID, "upload-status").text) and text,
            what="upload status",
        )
        file_id = status.split(" as ")[1].rstrip(".")
        assert httpx.get(f"{root}/v1/files/{file_id}/content").content == b"open mode\n"
        click_in_page(driver, f'tr[data-file-id="{file_id}"] button.delete')
        eventually(lambda: driver.switch_to.alert, what="the confirm dialog").accept()
        eventually(lambda: httpx.get(f"{root}/v1/files/{file_id}").status_code == 404, what="the file deleted")
        assert not unexpected_errors(driver)
    finally:
        driver.quit()
