"""`batchd projects set | list` and `batchd keys create --admin`, against a fresh database of each kind."""

from __future__ import annotations

import subprocess
from types import SimpleNamespace
from typing import cast

import pytest

from harness import db
from harness.server import BATCHD, ServerProcess


def _batchd(tmp_path, database_url: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(BATCHD), *args, "--data-dir", str(tmp_path)]
    if database_url:
        cmd += ["--database-url", database_url]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)


@pytest.mark.slow
def test_projects_set_changes_only_what_is_given_and_list_shows_it(tmp_path, database_factory):
    url = database_factory()
    assert _batchd(tmp_path, url, "projects", "list").stdout == ""

    assert _batchd(tmp_path, url, "projects", "set", "team-a", "--weight", "3").stdout == (
        "team-a\tweight 3\tmax enqueued tokens default\tcompletion windows default\n"
    )
    _batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "90000")
    _batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "500")
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines() == [
        "team-a\tweight 3\tmax enqueued tokens 90000\tcompletion windows default",
        "team-b\tweight 1\tmax enqueued tokens 500\tcompletion windows default",
    ]

    _batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "default")
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines()[0] == (
        "team-a\tweight 3\tmax enqueued tokens default\tcompletion windows default"
    )

    # Completion windows: a list, then back to the server's.
    assert _batchd(tmp_path, url, "projects", "set", "team-b", "--completion-windows", "24h, 2h").stdout == (
        "team-b\tweight 1\tmax enqueued tokens 500\tcompletion windows 24h,2h\n"
    )
    _batchd(tmp_path, url, "projects", "set", "team-a", "--completion-windows", "24h")
    _batchd(tmp_path, url, "projects", "set", "team-a", "--completion-windows", "default")
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines()[0].endswith("\tcompletion windows default")

    # Refused, and nothing stored changes.
    for bad, message in (
        (["--weight", "0"], "weight must be a whole number of at least 1"),
        (["--max-enqueued-tokens", "-1"], "must not be negative"),
        (["--completion-windows", "soon"], "invalid completion window 'soon'"),
        (["--completion-windows", ","], "at least one window"),
        ([], "nothing to set"),
    ):
        done = _batchd(tmp_path, url, "projects", "set", "team-b", *bad, check=False)
        assert done.returncode == 2 and message in done.stderr, done
    refused = _batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "lots", check=False)
    assert refused.returncode == 2 and "expected a whole number or 'default'" in refused.stderr
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines()[1] == (
        "team-b\tweight 1\tmax enqueued tokens 500\tcompletion windows 24h,2h"
    )


def test_admin_keys_are_marked_in_the_listing(tmp_path, database_factory):
    url = database_factory()
    _batchd(tmp_path, url, "keys", "create", "--project", "ops", "--admin")
    _batchd(tmp_path, url, "keys", "create", "--project", "team-a")
    listed = [line.split("\t") for line in _batchd(tmp_path, url, "keys", "list").stdout.splitlines()]
    assert [(row[1], row[-1]) for row in listed] == [("ops", "admin"), ("team-a", "active")]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_projects_limit_and_archive_go_through_the_administration_api_services(tmp_path, database_factory):
    url = database_factory()
    key = _batchd(tmp_path, url, "keys", "create", "--project", "team-c").stdout.strip()
    assert key.startswith("bd-")
    limited = _batchd(tmp_path, url, "projects", "limit", "team-c", "--model", "m1", "--max-requests-per-1-day", "500")
    assert limited.stdout == "team-c\tm1\tinput tokens a day None\trequests a day 500\n"
    assert (
        _batchd(
            tmp_path, url, "projects", "limit", "nobody", "--model", "m1", "--max-requests-per-1-day", "1", check=False
        ).returncode
        == 2
    )
    assert "archived; 0 batches cancelled" in _batchd(tmp_path, url, "projects", "archive", "team-c").stderr
    refused = _batchd(
        tmp_path, url, "projects", "limit", "team-c", "--model", "m1", "--max-requests-per-1-day", "none", check=False
    )
    assert refused.returncode == 2 and "archived" in refused.stderr
    # The same audit log as the API's: the key, the limit and the archive, with no actor.
    where = cast(ServerProcess, SimpleNamespace(database_url=url, data_dir=tmp_path))
    rows = db.execute(where, "SELECT type, resource_id, actor_key_id FROM audit_logs ORDER BY seq")
    assert rows == [
        ("api_key.created", "key_1", None),
        ("rate_limit.updated", "rl-m1", None),
        ("project.archived", "team-c", None),
    ]
