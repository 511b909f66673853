"""Replicas start together: their migrations on one Postgres database must not race."""

from __future__ import annotations

import subprocess

from harness import postgres
from harness.server import BATCHD


def test_four_processes_migrate_one_postgres_database_at_once(tmp_path):
    url = postgres.create_database()
    try:
        procs = [
            subprocess.Popen(
                [str(BATCHD), "db", "upgrade", "--database-url", url, "--data-dir", str(tmp_path / str(i))],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for i in range(4)
        ]
        outputs = [p.communicate(timeout=120)[0] for p in procs]
    finally:
        postgres.drop_database(url)
    assert [p.returncode for p in procs] == [0, 0, 0, 0], outputs
