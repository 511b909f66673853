"""The engine calls in flight, by request id, shared by the in-process and upstream registries.

Each call runs in a task of its own (:meth:`InflightRequests.start`, in-process engines) or in
its caller's task (:meth:`InflightRequests.track`, upstream lines), so
:meth:`InflightRequests.abort` cancels exactly that request (vLLM aborts a cancelled generation;
an upstream's connection closes) and the registry can tell an abort apart from a cancellation
of its caller."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class InflightRequests:
    def __init__(self) -> None:
        self.tasks: dict[str, asyncio.Task] = {}
        self._aborted: set[str] = set()

    def start(self, request_id: str, call: Coroutine[Any, Any, Any]) -> asyncio.Task:
        if request_id in self.tasks:
            call.close()
            raise ValueError(f"Request {request_id!r} is already in flight.")
        task = asyncio.create_task(call, name=f"batchd-line-{request_id}")
        self.tasks[request_id] = task
        return task

    def track(self, request_id: str, caller: asyncio.Task) -> None:
        """Register the caller's own task for ``request_id``: :meth:`abort` then cancels the
        caller, which must tell that apart from any other cancel (see ``aborted_only``). It saves
        a task per line where the call needs no task of its own (an upstream's HTTP request:
        the extra task was 0.4x of the request's own CPU, bench/results/*-W8-layers.md)."""
        if request_id in self.tasks:
            raise ValueError(f"Request {request_id!r} is already in flight.")
        self.tasks[request_id] = caller

    def aborted_only(self, request_id: str, caller: asyncio.Task) -> bool:
        """For a tracked caller that caught CancelledError: True, after undoing the cancel, when
        :meth:`abort` was its only cause (the caller then raises RequestAborted instead)."""
        if request_id in self._aborted and caller.cancelling() == 1:
            caller.uncancel()
            return True
        return False

    def finish(self, request_id: str) -> None:
        self.tasks.pop(request_id, None)
        self._aborted.discard(request_id)

    def was_aborted(self, request_id: str) -> bool:
        return request_id in self._aborted

    def abort(self, request_id: str) -> bool:
        """Cancel ``request_id``'s call; False if it is not running."""
        task = self.tasks.get(request_id)
        if task is None or task.done():
            return False
        self._aborted.add(request_id)
        task.cancel()
        return True

    def abort_all(self) -> list[asyncio.Task]:
        """Cancel every call; returns their tasks (to wait for)."""
        tasks = list(self.tasks.values())
        for request_id in list(self.tasks):
            self.abort(request_id)
        return tasks
