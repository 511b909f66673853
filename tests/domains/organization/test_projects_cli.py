"""`batchd projects set | list` and `batchd keys create --admin`, against a fresh database of each
kind (migrated by `batchd db upgrade`, as they refuse any database not at head), through the command's entry point (`app.cli.main`) in this process."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from harness import db
from harness.server import ServerProcess
from tests.support.cli import batchd

# A project's own stored-bytes and active-batch limits, as `projects list` shows them unset.
QUOTAS = "\tmax bytes default\tmax active batches default"


def test_projects_set_changes_only_what_is_given_and_list_shows_it(tmp_path, database_factory):
    url = database_factory()
    batchd(tmp_path, url, "db", "upgrade")
    assert batchd(tmp_path, url, "projects", "list").stdout == ""

    assert batchd(tmp_path, url, "projects", "set", "team-a", "--weight", "3").stdout == (
        f"team-a\tweight 3\tmax enqueued tokens default{QUOTAS}\tcompletion windows default\tretention days none\n"
    )
    batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "90000")
    batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "500")
    assert batchd(tmp_path, url, "projects", "list").stdout.splitlines() == [
        f"team-a\tweight 3\tmax enqueued tokens 90000{QUOTAS}\tcompletion windows default\tretention days none",
        f"team-b\tweight 1\tmax enqueued tokens 500{QUOTAS}\tcompletion windows default\tretention days none",
    ]

    batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "default")
    assert batchd(tmp_path, url, "projects", "list").stdout.splitlines()[0] == (
        f"team-a\tweight 3\tmax enqueued tokens default{QUOTAS}\tcompletion windows default\tretention days none"
    )

    # Completion windows: a list, then back to the server's.
    assert batchd(tmp_path, url, "projects", "set", "team-b", "--completion-windows", "24h, 2h").stdout == (
        f"team-b\tweight 1\tmax enqueued tokens 500{QUOTAS}\tcompletion windows 24h,2h\tretention days none\n"
    )
    batchd(tmp_path, url, "projects", "set", "team-a", "--completion-windows", "24h")
    batchd(tmp_path, url, "projects", "set", "team-a", "--completion-windows", "default")
    assert (
        batchd(tmp_path, url, "projects", "list")
        .stdout.splitlines()[0]
        .endswith(f"{QUOTAS}\tcompletion windows default\tretention days none")
    )

    # Retention: set, shown, audited, turned off again.
    assert batchd(tmp_path, url, "projects", "set", "team-b", "--retention-days", "30").stdout.endswith(
        "\tretention days 30\n"
    )
    assert batchd(tmp_path, url, "projects", "list").stdout.splitlines()[1].endswith("\tretention days 30")
    batchd(tmp_path, url, "projects", "set", "team-b", "--retention-days", "none")
    where = cast(ServerProcess, SimpleNamespace(database_url=url, data_dir=tmp_path))
    assert db.execute(where, "SELECT type, resource_id, actor_key_id, details FROM audit_logs ORDER BY seq") == [
        ("project.updated", "team-b", None, '{"id": "team-b", "changes_requested": {"retention_days": 30}}'),
        ("project.updated", "team-b", None, '{"id": "team-b", "changes_requested": {"retention_days": null}}'),
    ]

    # Its own stored-bytes and active-batch limits: a number, none, back to the server's.
    assert batchd(
        tmp_path, url, "projects", "set", "team-c", "--max-bytes", "5000", "--max-active-batches", "none"
    ).stdout == (
        "team-c\tweight 1\tmax enqueued tokens default\tmax bytes 5000\tmax active batches none"
        "\tcompletion windows default\tretention days none\n"
    )
    batchd(tmp_path, url, "projects", "set", "team-c", "--max-bytes", "default")
    assert (
        "\tmax bytes default\tmax active batches none\t"
        in batchd(tmp_path, url, "projects", "list").stdout.splitlines()[2]
    )

    # Refused, and nothing stored changes.
    for bad, message in (
        (["--weight", "0"], "weight must be a whole number of at least 1"),
        (["--max-enqueued-tokens", "-1"], "must not be negative"),
        (["--completion-windows", "soon"], "invalid completion window 'soon'"),
        (["--completion-windows", ","], "at least one window"),
        (["--retention-days", "0"], "retention days must be a whole number from 1 to 36500"),
        (["--max-bytes", "0"], "max bytes must be a whole number of at least 1, 'none' or 'default'"),
        ([], "nothing to set"),
    ):
        done = batchd(tmp_path, url, "projects", "set", "team-b", *bad, check=False)
        assert done.returncode == 2 and message in done.stderr, done
    refused = batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "lots", check=False)
    assert refused.returncode == 2 and "expected a whole number or 'default'" in refused.stderr
    assert batchd(tmp_path, url, "projects", "list").stdout.splitlines()[1] == (
        f"team-b\tweight 1\tmax enqueued tokens 500{QUOTAS}\tcompletion windows 24h,2h\tretention days none"
    )


def test_admin_keys_are_marked_in_the_listing(tmp_path, database_factory):
    url = database_factory()
    batchd(tmp_path, url, "db", "upgrade")
    batchd(tmp_path, url, "keys", "create", "--project", "ops", "--admin")
    batchd(tmp_path, url, "keys", "create", "--project", "team-a")
    listed = [line.split("\t") for line in batchd(tmp_path, url, "keys", "list").stdout.splitlines()]
    assert [(row[1], row[-1]) for row in listed] == [("ops", "admin"), ("team-a", "active")]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_projects_limit_and_archive_go_through_the_administration_api_services(tmp_path, database_factory):
    url = database_factory()
    batchd(tmp_path, url, "db", "upgrade")
    key = batchd(tmp_path, url, "keys", "create", "--project", "team-c").stdout.strip()
    assert key.startswith("bd-")
    limited = batchd(tmp_path, url, "projects", "limit", "team-c", "--model", "m1", "--max-requests-per-1-day", "500")
    assert limited.stdout == "team-c\tm1\tinput tokens a day None\trequests a day 500\n"
    assert (
        batchd(
            tmp_path, url, "projects", "limit", "nobody", "--model", "m1", "--max-requests-per-1-day", "1", check=False
        ).returncode
        == 2
    )
    assert "archived; 0 batches cancelled" in batchd(tmp_path, url, "projects", "archive", "team-c").stderr
    refused = batchd(
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
