"""Test hooks compiled into the server: named points where a test can freeze a process."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path


async def fault_point(name: str, data_dir: Path) -> None:
    """Test-only: with BATCHD_TEST_FAULT=<name>, stop here (marker file written) so a test can
    SIGKILL the process at a known point. Does nothing otherwise."""
    if os.environ.get("BATCHD_TEST_FAULT") != name:
        return
    (data_dir / f"fault-{name}").touch()
    await asyncio.Event().wait()
