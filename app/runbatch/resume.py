"""--resume: find which lines an interrupted run already wrote."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from app.pipeline.lines import load_line


@dataclass
class Finished:
    """What a partial output already holds: the custom_ids written, and how many error lines
    without a custom_id (input lines that were not JSON, or had none) were written. Those are
    written the moment their input line is read, in input order, so the ones already written are
    exactly the first `anonymous` such lines of the input."""

    custom_ids: set[str] = field(default_factory=set)
    anonymous: int = 0

    def __len__(self) -> int:
        return len(self.custom_ids) + self.anonymous


def finished_lines(path: Path, into: Finished | None = None) -> Finished:
    """The complete lines of a partial output; a torn last line (the process died mid-write) is
    cut off so appending continues cleanly."""
    done = Finished() if into is None else into  # not `or`: an empty Finished is falsy
    if not path.exists():
        return done
    with path.open("rb+") as fh:
        good_end = 0
        for raw in fh:
            if not raw.endswith(b"\n"):
                break
            try:
                custom_id = load_line(raw).get("custom_id")
            except ValueError:
                break
            good_end += len(raw)
            if custom_id is None:
                done.anonymous += 1
            else:
                done.custom_ids.add(str(custom_id))
        fh.truncate(good_end)
        fh.flush()
        os.fsync(fh.fileno())
    return done
