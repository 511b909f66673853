"""Fault injection at the edges: a small tmpfs that can be filled, and a private Postgres that
can be stopped and started again (never the machine's shared one)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from harness import watchdog
from harness.ports import free_port


def postgres_bindir() -> Path | None:
    """Where the Postgres server binaries (initdb, pg_ctl) are: $BATCHD_TEST_PG_BIN, else what
    `pg_config --bindir` says, else Debian's /usr/lib/postgresql/<version>/bin of the highest
    version, else the directory of an `initdb` on PATH; None when none holds both."""
    if override := os.environ.get("BATCHD_TEST_PG_BIN"):
        return Path(override)
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            bindir = subprocess.run([pg_config, "--bindir"], check=True, capture_output=True, text=True).stdout
            candidates.append(Path(bindir.strip()))
    versions = [path for path in Path("/usr/lib/postgresql").glob("*/bin") if path.parent.name.isdigit()]
    candidates += sorted(versions, key=lambda path: int(path.parent.name), reverse=True)
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).parent)
    return next((c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()), None)


def require_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")


@contextlib.contextmanager
def tmpfs(path: Path, size: str = "8m"):
    """Mount a tmpfs of `size` at `path` for the duration of the block."""
    require_root()
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write a filler file until the filesystem under `directory` is full; remove it to free space."""
    filler = directory / "filler"
    block = b"\0" * (64 * 1024)
    with filler.open("wb", buffering=0) as fh:
        while True:
            try:
                fh.write(block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
    # Smaller writes take the last pages too.
    with filler.open("ab", buffering=0) as fh:
        with contextlib.suppress(OSError):
            while True:
                fh.write(b"\0" * 512)
    return filler


class PrivatePostgres:
    """A throwaway Postgres cluster on a free port in a temp dir, run as the `postgres` user when
    this process is root (initdb refuses root)."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="batchd-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        self.bin = postgres_bindir()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")

    @property
    def url(self) -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def init(self) -> PrivatePostgres:
        if self.bin is None:
            pytest.skip("no Postgres server binaries (initdb, pg_ctl) found")
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        return self.start()

    def start(self) -> PrivatePostgres:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"
        )
        # pg_ctl puts the postmaster in a session of its own: it dies with this process only
        # through the watchdog (its backends follow their postmaster).
        self.postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        watchdog.register_pid(self.postmaster)
        return self

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        watchdog.unregister_pid(self.postmaster)

    def destroy(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
