"""`batchd serve` in open mode (no key anywhere) binds loopback only: on another address it exits
before binding, with one line saying how to configure keys, unless --allow-open-mode
(BATCHD_ALLOW_OPEN_MODE=true). The allowed cases are checked at the decision itself, so no test
binds a non-loopback address."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import _open_mode_refusal, _settings, build_parser, main
from harness.ports import free_port

BATCHD = Path(sys.executable).with_name("batchd")


def _keyless_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("BATCHD_API_KEYS", "BATCHD_ADMIN_KEYS")}


def _refusal(*argv: str) -> str | None:
    return _open_mode_refusal(_settings(build_parser().parse_args(["serve", *argv])))


def test_open_mode_on_all_addresses_exits_with_one_line_before_binding(tmp_path):
    port = free_port()
    result = subprocess.run(
        [str(BATCHD), "serve", "--host", "0.0.0.0", "--port", str(port), "--data-dir", str(tmp_path), "--no-models"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_keyless_env(),
    )
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for named in ("0.0.0.0", "BATCHD_API_KEYS", "BATCHD_ADMIN_KEYS", "batchd keys create --admin", "--allow-open-mode"):
        assert named in lines[0]
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
def test_open_mode_off_loopback_is_allowed_only_when_asked_or_keyed(tmp_path, monkeypatch, database_factory):
    for name in ("BATCHD_API_KEYS", "BATCHD_ADMIN_KEYS", "BATCHD_ALLOW_OPEN_MODE"):
        monkeypatch.delenv(name, raising=False)
    storage = ["--data-dir", str(tmp_path)]
    if url := database_factory():
        storage += ["--database-url", url]
    assert "BATCHD_ADMIN_KEYS" in (_refusal("--host", "0.0.0.0", *storage) or "")
    assert "BATCHD_ADMIN_KEYS" in (_refusal("--host", "10.0.0.5", *storage) or "")
    for loopback in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert _refusal("--host", loopback, *storage) is None, loopback
    assert _refusal("--host", "0.0.0.0", "--allow-open-mode", *storage) is None
    monkeypatch.setenv("BATCHD_ALLOW_OPEN_MODE", "true")
    assert _refusal("--host", "0.0.0.0", *storage) is None
    monkeypatch.delenv("BATCHD_ALLOW_OPEN_MODE")
    monkeypatch.setenv("BATCHD_ADMIN_KEYS", "key-admin")
    assert _refusal("--host", "0.0.0.0", *storage) is None
    monkeypatch.delenv("BATCHD_ADMIN_KEYS")
    # A stored key (the one the refusal suggests making) ends open mode too.
    assert main(["keys", "create", "--admin", *storage]) == 0
    assert _refusal("--host", "0.0.0.0", *storage) is None
