"""`batchd keys list` and `revoke` take effect on every replica within a second, and keys never
reach the logs: two real `batchd serve` processes over one database (their logs are the point;
moved from tests/domains/organization/test_api_keys.py, whose other tests run in process)."""

from __future__ import annotations

import subprocess
import time

import openai
import pytest

from app.domains.organization.auth import KEY_COUNT_TTL_SECONDS
from harness.client import openai_client
from harness.poll import wait_until
from harness.server import BATCHD, ServerProcess
from tests.support.keys import create_key, rejected

# Real `batchd serve` processes, without models: not in make test-fast (tests/conftest.py).
pytestmark = pytest.mark.engine


def _keys(server, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [str(BATCHD), "keys", *args, "--data-dir", str(server.data_dir)]
    if server.database_url:
        cmd += ["--database-url", server.database_url]
    return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=120)


def _rejected_a_second_later(clients) -> None:
    """The promise: any request that starts a second after the revoke returned is refused (on
    a loaded box a request itself may take longer, so no polling loop measures this)."""
    time.sleep(1.0)  # the promised second itself, not a wait for the server
    assert all(rejected(c) for c in clients), "a revoked key still works a second later"


@pytest.mark.slow
def test_keys_list_and_revoke_take_effect_on_every_replica_within_a_second(start_server):
    # Two replicas over one database (and one data dir, so one keyed-hash secret).
    first = start_server({"BATCHD_LOG_LEVEL": "debug"})
    second = ServerProcess(first.data_dir, first.database_url, env={"BATCHD_LOG_LEVEL": "debug"}).start()
    try:
        key_one, key_two = create_key(first, "team-one"), create_key(first, "team-two")
        listed = _keys(first, "list").stdout.splitlines()
        assert len(listed) == 2
        rows = [line.split("\t") for line in listed]
        assert [(r[1], r[3]) for r in rows] == [("team-one", "active"), ("team-two", "active")]
        assert all(r[0].isdigit() and r[2].endswith("Z") for r in rows)
        assert key_one not in "\n".join(listed) and key_one[3:12] not in "\n".join(listed)

        clients = {(s.port, k): openai_client(s.base_url, k) for s in (first, second) for k in (key_one, key_two)}
        # Both servers started in open mode; it ends within their 5 s key-count cache. Until then
        # any key (a revoked one too) is accepted, so wait for an unknown key to be refused.
        strangers = [openai_client(s.base_url, "not-a-key") for s in (first, second)]
        wait_until(lambda: all(rejected(c) for c in strangers), 10, "open mode to end on both", interval=0.2)
        assert not any(rejected(c) for c in clients.values())

        assert _keys(first, "revoke", rows[0][0]).returncode == 0
        _rejected_a_second_later([clients[(s.port, key_one)] for s in (first, second)])
        assert not any(rejected(clients[(s.port, key_two)]) for s in (first, second))
        with pytest.raises(openai.AuthenticationError) as info:
            clients[(second.port, key_one)].files.list()
        assert key_one not in info.value.message  # masked: bd-xxx***wxyz
        assert _keys(first, "list").stdout.splitlines()[0].split("\t")[3].startswith("revoked ")

        # Revoking every key locks the server; it does not fall back to open mode.
        assert _keys(first, "revoke", rows[1][0]).returncode == 0
        _rejected_a_second_later([clients[(s.port, key_two)] for s in (first, second)])
        anyone = openai_client(second.base_url, "whatever")
        # Not a wait for the server: time passes the key-count cache (KEY_COUNT_TTL_SECONDS), so
        # the server counts the stored keys again, revoked ones included, and stays locked.
        time.sleep(KEY_COUNT_TTL_SECONDS + 1)
        assert rejected(anyone)

        missing = _keys(first, "revoke", "999999", check=False)
        assert missing.returncode == 1 and "no stored key with id 999999" in missing.stderr
    finally:
        second.stop()
    # Keys never reach the logs, request logging included.
    for server in (first, second):
        log = server.log()
        assert "GET /v1/files" in log or "/v1/files" in log
        assert key_one not in log and key_two not in log
