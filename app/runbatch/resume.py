"""--resume: find which custom_ids an interrupted run already wrote."""

from __future__ import annotations

import json
import os
from pathlib import Path


def finished_custom_ids(path: Path) -> set[str]:
    """custom_ids of the complete lines in a partial output; a torn last line (the process died
    mid-write) is cut off so appending continues cleanly."""
    if not path.exists():
        return set()
    done: set[str] = set()
    with path.open("rb+") as fh:
        good_end = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                custom_id = json.loads(raw).get("custom_id")
            except ValueError:
                break
            good_end += len(raw)
            if custom_id is not None:
                done.add(str(custom_id))
        fh.truncate(good_end)
        fh.flush()
        os.fsync(fh.fileno())
    return done
