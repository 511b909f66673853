"""Database failures that are an outage, not a fault of the work that met them: the database
cannot be reached right now, or (SQLite) it is busy. A request meeting one is answered 503 and may
be retried as is (app/http/error_handlers.py); a batch step meeting one does not count towards
its batch's dead letter (app/worker/dead_letter.py)."""

from __future__ import annotations

from sqlalchemy.exc import DBAPIError, OperationalError

# Connection-level failures: the database is down, restarting or unreachable (Postgres SQLSTATE
# class 08 and 57P01-57P03 arrive as asyncpg exceptions of these names).
_UNREACHABLE_NAMES = {
    "ConnectionDoesNotExistError",
    "CannotConnectNowError",
    "AdminShutdownError",
    "CrashShutdownError",
    "PostgresConnectionError",
    "ConnectionFailureError",
    "ClientCannotConnectError",
}


def is_database_unreachable(exc: BaseException) -> bool:
    """True when `exc` (or what it wraps) says the database cannot be reached right now; such a
    request may be retried as is, so it is a 503, not a 500."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        if isinstance(current, (ConnectionRefusedError, ConnectionResetError, BrokenPipeError)):
            return True
        if type(current).__name__ in _UNREACHABLE_NAMES:
            return True
        todo += [getattr(current, "orig", None), current.__cause__, current.__context__]
    return False


def is_database_busy(exc: BaseException) -> bool:
    """True for SQLite's "database is locked" (and a Postgres lock timeout)."""
    if not isinstance(exc, OperationalError):
        return False
    text = str(exc.orig).lower()
    return "database is locked" in text or "database is busy" in text or "lock timeout" in text
