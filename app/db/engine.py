"""Engines and session factories.

SQLite allows one writer at a time, so it gets two engines on the same file: a single-connection
writer whose transactions start with BEGIN IMMEDIATE (a deferred transaction that later upgrades
to a write fails with "database is locked" without waiting on busy_timeout), and a small reader
pool. Writers therefore queue in Python, not in SQLite's busy loop. Postgres uses one pool for both.

Neither pool overflows: an overflow connection is opened for one checkout and closed after it,
and opening one blocks the event loop (aiosqlite starts a thread per connection and waits for
it to run; asyncpg does a TCP and auth handshake). Under the load test (bench/workloads/load, 50 clients)
that churn took 40% of the API loop's samples; callers wait for a pooled connection instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

SQLITE_READERS = 8
# Up to `postgres_pool` connections a replica (BATCHD_DATABASE_POOL_SIZE), of which POSTGRES_IDLE
# stay open between bursts: replicas share one server's max_connections (100 by default), so ten
# replicas, or a test session's servers, must not each hold twenty idle ones.
POSTGRES_POOL = 20
POSTGRES_IDLE = 5
# A failed statement's error names the statement, not its values: those are webhook secrets, key
# hashes, tenants' file names and batch metadata, and the error lands in logs and tracebacks.
HIDE_PARAMETERS = True


def _sqlite_engine(url: str, *, writer: bool, busy_timeout_ms: int) -> AsyncEngine:
    engine = create_async_engine(
        url,
        pool_size=1 if writer else SQLITE_READERS,
        max_overflow=0,
        pool_timeout=30,
        connect_args={"timeout": busy_timeout_ms / 1000},
        hide_parameters=HIDE_PARAMETERS,
    )

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Take over transaction control from the driver (SQLAlchemy's documented recipe).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={busy_timeout_ms}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=FULL")
        if writer:
            # Persistent in the file; set from the single writer connection only.
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine


class Database:
    """Owns the engines; hands out read and write sessions (callers or deps commit)."""

    def __init__(self, url: str, *, sqlite_busy_timeout_ms: int = 15_000, postgres_pool: int = POSTGRES_POOL) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        if self.is_sqlite:
            self.write_engine = _sqlite_engine(url, writer=True, busy_timeout_ms=sqlite_busy_timeout_ms)
            self.read_engine = _sqlite_engine(url, writer=False, busy_timeout_ms=sqlite_busy_timeout_ms)
        else:
            self.write_engine = create_async_engine(
                url,
                pool_size=min(POSTGRES_IDLE, postgres_pool),
                max_overflow=max(0, postgres_pool - POSTGRES_IDLE),
                pool_pre_ping=True,
                hide_parameters=HIDE_PARAMETERS,
            )
            self.read_engine = self.write_engine
        self.write_sessions = async_sessionmaker(self.write_engine, expire_on_commit=False)
        self.read_sessions = async_sessionmaker(self.read_engine, expire_on_commit=False)

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        """One short write transaction, committed on success (never hold it across an engine await)."""
        async with self.write_sessions() as session:
            async with session.begin():
                yield session

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self.read_sessions() as session:
            yield session

    async def ping(self) -> None:
        """Raises unless the database answers a trivial query (readiness: /health)."""
        async with self.read_engine.connect() as connection:
            await connection.exec_driver_sql("SELECT 1")

    async def dispose(self) -> None:
        await self.write_engine.dispose()
        if self.read_engine is not self.write_engine:
            await self.read_engine.dispose()
