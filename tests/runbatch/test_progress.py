"""run-batch's closing summary times the lines, not the engines' shutdown that comes after them
and before the summary is printed (seconds on CPU: a W3 run reported 17.0 s for 9.5 s of lines)."""

from __future__ import annotations

from app.runbatch import progress as progress_module
from app.runbatch.progress import Progress


def test_summary_ends_when_the_output_is_closed(monkeypatch):
    clock = iter([100.0, 101.0, 102.0, 110.0, 130.0])
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    progress = Progress(total=2)  # started at 100
    progress.update(True, output_tokens=8)  # 101
    progress.update(False)  # 102
    progress.close()  # 110: the last output line written
    progress.close()  # a second close keeps the first time
    assert progress.summary() == "done: 2 lines (ok 1, failed 1) in 10.0 s; 0.2 lines/s; 8 output tokens (1 tok/s)"
