"""Exceptions the engine layer raises instead of producing a result line.

A failing *line* is never an exception: every engine's ``execute`` (see
:mod:`app.engine.protocol`) turns it into a :class:`~app.engine.results.LineResult` with an
error body. These are the cases where writing an error line would be wrong.
"""

from __future__ import annotations

from app.core.line_errors import LineErrorCode


class EngineError(Exception):
    """Base class for engine-layer failures that are not a line's own fault."""


class EngineDeadError(EngineError):
    """The model's engine died; the line did not fail and must be retried.

    The worker should stop feeding this engine, keep the line unfinished and
    let the batch resume (in this process after a restart, or elsewhere).
    """

    def __init__(self, model: str, message: str = "") -> None:
        self.model = model
        super().__init__(message or f"The engine for model {model!r} is dead.")


class RequestAborted(EngineError):
    """The request was stopped by the engines' ``abort`` (e.g. its batch was cancelled)."""

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        super().__init__(f"Request {request_id!r} was aborted.")


class LineCannotRun(EngineError):
    """The line fails with ``code`` (an error line, not a response): running it (again) would not
    fare better, or not in time."""

    code: LineErrorCode


class EngineUnavailableError(LineCannotRun):
    """The model's engine could not take the line by the time its request must start (a flex
    request while the engine restarts, or is busy with another model's batch)."""

    code = LineErrorCode.ENGINE_UNAVAILABLE

    def __init__(self, model: str, reason: str = "") -> None:
        self.model = model
        super().__init__(f"The engine for model {model!r} is unavailable: {reason or 'it died'}.")


class EngineCrashedError(LineCannotRun):
    """The line was in flight at two deaths of its model's engine: it is taken for the cause and
    never runs again (the others run on), see :mod:`app.engine.poison`."""

    code = LineErrorCode.ENGINE_CRASHED

    def __init__(self, model: str, deaths: int) -> None:
        self.model = model
        super().__init__(
            f"The engine for model {model!r} died {deaths} times while this line was in flight: "
            "the line is taken for the cause and is not run again."
        )


class EngineNotReadyError(EngineError):
    """``execute`` was called before ``start`` finished or after ``shutdown``."""


class ModelConfigError(ValueError):
    """A ``--model`` string or config file entry is malformed."""
