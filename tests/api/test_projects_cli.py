"""`batchd projects set | list` and `batchd keys create --admin`, against a fresh database of each kind."""

from __future__ import annotations

import subprocess

from harness.server import BATCHD


def _batchd(tmp_path, database_url: str | None, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(BATCHD), *args, "--data-dir", str(tmp_path)]
    if database_url:
        cmd += ["--database-url", database_url]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)


def test_projects_set_changes_only_what_is_given_and_list_shows_it(tmp_path, database_factory):
    url = database_factory()
    assert _batchd(tmp_path, url, "projects", "list").stdout == ""

    assert _batchd(tmp_path, url, "projects", "set", "team-a", "--weight", "3").stdout == (
        "team-a\tweight 3\tmax enqueued tokens default\n"
    )
    _batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "90000")
    _batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "500")
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines() == [
        "team-a\tweight 3\tmax enqueued tokens 90000",
        "team-b\tweight 1\tmax enqueued tokens 500",
    ]

    _batchd(tmp_path, url, "projects", "set", "team-a", "--max-enqueued-tokens", "default")
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines()[0] == (
        "team-a\tweight 3\tmax enqueued tokens default"
    )

    # Refused, and nothing stored changes.
    for bad, message in (
        (["--weight", "0"], "weight must be a whole number of at least 1"),
        (["--max-enqueued-tokens", "-1"], "must not be negative"),
        ([], "nothing to set"),
    ):
        done = _batchd(tmp_path, url, "projects", "set", "team-b", *bad, check=False)
        assert done.returncode == 2 and message in done.stderr, done
    refused = _batchd(tmp_path, url, "projects", "set", "team-b", "--max-enqueued-tokens", "lots", check=False)
    assert refused.returncode == 2 and "expected a whole number or 'default'" in refused.stderr
    assert _batchd(tmp_path, url, "projects", "list").stdout.splitlines()[1] == (
        "team-b\tweight 1\tmax enqueued tokens 500"
    )


def test_admin_keys_are_marked_in_the_listing(tmp_path, database_factory):
    url = database_factory()
    _batchd(tmp_path, url, "keys", "create", "--project", "ops", "--admin")
    _batchd(tmp_path, url, "keys", "create", "--project", "team-a")
    listed = [line.split("\t") for line in _batchd(tmp_path, url, "keys", "list").stdout.splitlines()]
    assert [(row[1], row[-1]) for row in listed] == [("ops", "admin"), ("team-a", "active")]
