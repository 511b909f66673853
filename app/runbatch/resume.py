"""--resume: find which lines an interrupted run already wrote."""

from __future__ import annotations

import os
from pathlib import Path

from app.pipeline.lines import LineIds, ResultLine


def finished_lines(path: Path, into: LineIds | None = None) -> LineIds:
    """The complete lines of a partial output; a torn last line (the process died mid-write) is
    cut off so appending continues cleanly."""
    done = LineIds() if into is None else into  # not `or`: an empty LineIds is falsy
    if not path.exists():
        return done
    with path.open("rb+") as fh:
        good_end = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                custom_id = ResultLine.read(raw).custom_id
            except ValueError:
                break
            good_end += len(raw)
            done.add(custom_id)
        fh.truncate(good_end)
        fh.flush()
        os.fsync(fh.fileno())
    return done
