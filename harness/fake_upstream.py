"""A fake OpenAI-compatible upstream fleet: one asyncio process serving any number of ports,
cheap enough per request that it does not eat the CPU a benchmark measures.

Every port serves ``GET /v1/models`` (the model given by --model) and POSTs to
``/v1/chat/completions`` (5 prompt tokens, 2 completion tokens; 3 of the prompt tokens cached
when the body has a ``prompt_cache_key``), ``/v1/embeddings`` (3 tokens an input),
``/v1/messages`` (Anthropic's shape) and ``/v1/audio/transcriptions`` (any form; 4 seconds). A
request takes --delay-ms, with at most --max-concurrency at once per port. The rest wait in the port's queue and are served as vLLM's
priority scheduler (``--scheduling-policy priority``) serves its waiting queue: lowest
``priority`` first (none counts as 0, vLLM's default), then arrival order. Running requests are
never preempted (vLLM preempts only for KV-cache room, which the fake does not model). A fleet
whose requests carry no priority, or equal ones, is first come, first served.

Fault schedule: a chat request whose last message reads ``plan:A,B,C#tag`` (the tag makes
it unique) plays act A on its
first attempt, B on its second, ... (the last act repeats). Acts: ``ok``, ``429`` (with
``Retry-After: 1``), ``500``, ``503``, ``400`` (an error body), ``reset`` (the connection is
dropped unanswered), ``stall`` (no answer for a minute), ``hold`` (no answer until the client
goes away). ``GET /_stats`` returns counters, among them ``closed_in_flight``: requests whose
client closed the connection before the answer, and ``first_at`` / ``last_at``: the wall-clock
times of the first request and the last answer (a benchmark's run as the fleet saw it).
``GET /_stats/reset`` zeroes them all. ``GET /_log`` lists every answered request as
``[started, finished, user, priority]``: when it left the queue and when it was answered
(wall-clock seconds), the body's ``user`` field and the priority it was queued at, so a test can
tell whose lines the fleet ran when.

Held: with --held, every request (chat, embeddings, ...) waits in its port's queue, none served,
until ``GET /_release``; then the queues are served as above (lowest priority first). A test
holds a fleet until all its batches exist, so the order they were created in cannot decide
who is served first.

Priority: with --record-priority, ``GET /_priorities`` maps the last message of every chat
request received to its ``priority`` (null when it had none). With --reject-priority, a
request with a non-zero ``priority`` gets the 400 older vLLM releases answer on a server
started without ``--scheduling-policy priority``.

LoRA adapters: each --lora NAME (repeatable) is listed by ``GET /v1/models`` with ``parent`` set
to the model, as ``vllm serve --enable-lora --lora-modules NAME=PATH`` lists it, and answered:
a chat reply of an adapter reads ``fake answer (NAME)``. A fake with adapters answers a request
for a model it does not list 404, as vLLM does. ``/_stats`` counts the requests by the model they
named (``model:NAME``). In process, assigning ``FakeUpstream.loras`` loads and unloads adapters.

Tokenize: with --tokenize-failures N, ``POST /tokenize`` is served (vLLM's shape; the count is
the number of characters of the messages' contents, or of the prompt), its first N requests
answered 503; ``/_stats`` counts ``tokenize_ok`` and ``tokenize_failed``. Without it, 404.

    python -m harness.fake_upstream --port 9001 --port 9002 --delay-ms 200 --max-concurrency 32
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import itertools
import json
import os
import resource
import signal
import sys
import time
from collections import Counter
from typing import Any

_STALL_S = 60.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class PriorityGate:
    """At most `slots` holders at once; waiters are let in lowest priority first, then in
    arrival order (vLLM's priority scheduler's waiting queue). A `held` gate lets no one in
    until `open()`: everyone queues first, so the order they are let in is the queue's alone."""

    def __init__(self, slots: int, held: bool = False) -> None:
        self.slots = slots
        self.held = held
        self.running = 0
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []
        self._arrivals = itertools.count()

    async def acquire(self, priority: int) -> None:
        if not self.held and self.running < self.slots and not self._waiting:
            self.running += 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiting, (priority, next(self._arrivals), turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release()  # the slot was handed over as the waiter went away
            else:
                self._waiting = [entry for entry in self._waiting if entry[2] is not turn]
                heapq.heapify(self._waiting)
            raise

    def open(self) -> None:
        """Stop holding: let the first waiters in, up to the slots."""
        self.held = False
        while self.running < self.slots and self._waiting:
            *_, turn = heapq.heappop(self._waiting)
            if not turn.done():
                self.running += 1
                turn.set_result(None)

    def release(self) -> None:
        """Hand the slot to the first waiter (it stays taken) or free it."""
        while self._waiting:
            *_, turn = heapq.heappop(self._waiting)
            if not turn.done():
                turn.set_result(None)
                return
        self.running -= 1


def _priority(request: dict) -> int:
    value = request.get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


class FakeUpstream:
    def __init__(
        self,
        model: str,
        delay_s: float,
        max_concurrency: int,
        record_priority: bool = False,
        reject_priority: bool = False,
        tokenize_failures: int | None = None,
        loras: list[str] | None = None,
        held: bool = False,
    ) -> None:
        self.model = model
        self.held = held  # serve nothing until GET /_release
        self.gates: list[PriorityGate] = []
        self.loras = list(loras or [])
        self.tokenize_failures = tokenize_failures  # None: no /tokenize
        self.record_priority = record_priority
        self.reject_priority = reject_priority
        self.priorities: dict[str, int | None] = {}
        self.delay_s = delay_s
        self.max_concurrency = max_concurrency
        self.stats: Counter[str] = Counter()
        self.attempts: Counter[str] = Counter()
        self.open_connections = 0
        self.log: list[tuple[float, float, str, int]] = []
        self.first_at: float | None = None
        self.last_at: float | None = None

    def _models(self) -> bytes:
        cards = [{"id": self.model, "object": "model", "created": 0, "owned_by": "fake", "parent": None}]
        cards += [
            {"id": n, "object": "model", "created": 0, "owned_by": "fake", "parent": self.model} for n in self.loras
        ]
        return json.dumps({"object": "list", "data": cards}).encode()

    def _unknown_model(self, request: dict) -> bytes | None:
        """vLLM's 404 for a model it does not serve (checked by a fake with adapters only: the
        others answer any `model`)."""
        model = request.get("model")
        if not self.loras or model in (self.model, *self.loras):
            return None
        message = {
            "object": "error",
            "message": f"The model `{model}` does not exist.",
            "type": "NotFoundError",
            "param": "model",
            "code": 404,
        }
        return json.dumps(message).encode()

    async def serve(self, port: int) -> asyncio.AbstractServer:
        gate = PriorityGate(self.max_concurrency, self.held)
        self.gates.append(gate)
        return await asyncio.start_server(lambda r, w: self._connection(r, w, gate), "127.0.0.1", port, backlog=1024)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, gate: PriorityGate) -> None:
        self.open_connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                request_line, _, header_block = head.partition(b"\r\n")
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                length = 0
                for line in header_block.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                if not await self._answer(method, path, body, reader, writer, gate):
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self.open_connections -= 1
            writer.close()

    async def _answer(self, method, path, body, reader, writer, gate) -> bool:
        """Write one answer; False when the connection must end."""
        if method == "GET" and path == "/v1/models":
            return _write(writer, 200, self._models())
        if method == "GET" and path == "/_stats":
            stats: dict[str, Any] = {**self.stats, "open_connections": self.open_connections}
            stats.update(first_at=self.first_at, last_at=self.last_at)
            return _write(writer, 200, json.dumps(stats).encode())
        if method == "GET" and path == "/_priorities":
            return _write(writer, 200, json.dumps(self.priorities).encode())
        if method == "GET" and path == "/_log":
            return _write(writer, 200, json.dumps(self.log).encode())
        if method == "GET" and path == "/_release":
            self.release()
            return _write(writer, 200, b"{}")
        if method == "GET" and path == "/_stats/reset":
            self.stats.clear()
            self.first_at = self.last_at = None
            return _write(writer, 200, b"{}")
        if method == "POST" and path == "/tokenize" and self.tokenize_failures is not None:
            return _write(writer, *self._tokenize(json.loads(body)))
        if method != "POST" or path not in _ROUTES:
            return _write(writer, 404, b'{"error": {"message": "Not Found", "type": "NotFoundError"}}')
        request = {} if path == _TRANSCRIPTIONS else json.loads(body)  # a transcription is a multipart form
        if self.first_at is None:
            self.first_at = time.time()
        self.stats["requests"] += 1
        self.stats[f"model:{request.get('model')}"] += 1
        if (unknown := self._unknown_model(request)) is not None:
            return _write(writer, 404, unknown)
        priority = request.get("priority")
        if self.reject_priority and priority:
            self.stats["priority_refused"] += 1
            message: dict[str, Any] = {
                "object": "error",
                "message": f"Got priority {priority} but Priority scheduling is not enabled.",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
            return _write(writer, 400, json.dumps(message).encode())
        if self.record_priority and request.get("messages"):
            self.priorities[str(request["messages"][-1].get("content"))] = priority
        act = self._act(request)
        self.stats[f"act_{act}"] += 1
        if act == "reset":
            writer.transport.abort()
            return False
        if act in ("stall", "hold"):
            self.stats["in_flight"] += 1
            try:
                done = await _client_gone(reader, _STALL_S if act == "stall" else None)
            finally:
                self.stats["in_flight"] -= 1
            if done:
                self.stats["closed_in_flight"] += 1
            return False
        if act != "ok":
            status = int(act)
            headers = b"Retry-After: 1\r\n" if status == 429 else b""
            message = {
                "error": {
                    "message": f"fake {act}",
                    "type": "BadRequestError" if status == 400 else "Error",
                    "param": None,
                    "code": status,
                }
            }
            return _write(writer, status, json.dumps(message).encode(), headers)
        queued_at = _priority(request)
        self.stats["waiting"] += 1
        try:
            await gate.acquire(queued_at)
        finally:
            self.stats["waiting"] -= 1
        self.stats["in_flight"] += 1
        started = time.time()
        try:
            await asyncio.sleep(self.delay_s)
        finally:
            self.stats["in_flight"] -= 1
            gate.release()
        self.log.append((started, time.time(), str(request.get("user") or ""), queued_at))
        self.last_at = time.time()
        adapter = request.get("model") if request.get("model") in self.loras else None
        return _write(writer, 200, _reply(path, request, adapter))

    def release(self) -> None:
        """Open every port's gate (a fleet started --held serves from now on)."""
        self.held = False
        for gate in self.gates:
            gate.open()

    def _tokenize(self, request: dict) -> tuple[int, bytes]:
        if self.tokenize_failures:
            self.tokenize_failures -= 1
            self.stats["tokenize_failed"] += 1
            return 503, b'{"error": {"message": "fake 503", "type": "Error", "param": null, "code": 503}}'
        self.stats["tokenize_ok"] += 1
        messages = request.get("messages") or []
        count = sum(len(str(m.get("content", ""))) for m in messages) if messages else len(request.get("prompt", ""))
        return 200, json.dumps({"count": count, "max_model_len": 4096, "tokens": []}).encode()

    def _act(self, request: dict) -> str:
        messages = request.get("messages") or []
        text = messages[-1].get("content") if messages else None
        if not isinstance(text, str) or not text.startswith("plan:"):
            return "ok"
        plan = text[len("plan:") :].split("#")[0].split(",")
        attempt = self.attempts[text]
        self.attempts[text] += 1
        return plan[min(attempt, len(plan) - 1)]


async def _client_gone(reader: asyncio.StreamReader, timeout: float | None) -> bool:
    """Wait for the client to close the connection; True if it did (False: timed out)."""
    try:
        await asyncio.wait_for(reader.read(1), timeout)
        return True
    except TimeoutError:
        return False
    except ConnectionError:
        return True


_TRANSCRIPTIONS = "/v1/audio/transcriptions"
_ROUTES = ("/v1/chat/completions", "/v1/embeddings", "/v1/messages", _TRANSCRIPTIONS)


def _reply(path: str, request: dict, adapter: str | None = None) -> bytes:
    if path == _TRANSCRIPTIONS:
        return json.dumps({"text": "fake words", "usage": {"type": "duration", "seconds": 4}}).encode()
    if path == "/v1/messages":
        return json.dumps(
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": request.get("model"),
                "content": [{"type": "text", "text": "fake answer"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 2},
            }
        ).encode()
    if path == "/v1/embeddings":
        inputs = request.get("input")
        count = len(inputs) if isinstance(inputs, list) else 1
        return json.dumps(
            {
                "object": "list",
                "model": request.get("model"),
                "data": [{"object": "embedding", "index": i, "embedding": [0.0, 1.0]} for i in range(count)],
                "usage": {"prompt_tokens": 3 * count, "total_tokens": 3 * count},
            }
        ).encode()
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": f"fake answer ({adapter})" if adapter else "fake answer",
                    },
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": 5,
                "completion_tokens": 2,
                "total_tokens": 7,
                **({"prompt_tokens_details": {"cached_tokens": 3}} if "prompt_cache_key" in request else {}),
            },
        }
    ).encode()


def _write(writer: asyncio.StreamWriter, status: int, payload: bytes, extra: bytes = b"") -> bool:
    writer.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s"
        % (status, _REASONS.get(status, "Error").encode(), len(payload), extra, payload)
    )
    return True


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, action="append", required=True)
    parser.add_argument("--model", default="fake-model")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--max-concurrency", type=int, default=1_000_000)
    parser.add_argument("--cpu-file", help="on SIGTERM, write this process's CPU seconds here")
    parser.add_argument("--record-priority", action="store_true", help="serve GET /_priorities")
    parser.add_argument("--reject-priority", action="store_true", help="refuse a non-zero priority as vLLM's fcfs")
    parser.add_argument("--tokenize-failures", type=int, metavar="N", help="serve /tokenize, failing the first N")
    parser.add_argument("--lora", action="append", default=[], metavar="NAME", help="list and serve adapter NAME")
    parser.add_argument("--held", action="store_true", help="queue every request until GET /_release")
    args = parser.parse_args(argv)
    fake = FakeUpstream(
        args.model,
        args.delay_ms / 1000,
        args.max_concurrency,
        args.record_priority,
        args.reject_priority,
        args.tokenize_failures,
        args.lora,
        args.held,
    )
    servers = [await fake.serve(port) for port in args.port]
    print("ready", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    for server in servers:
        server.close()
    if args.cpu_file:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        with open(args.cpu_file, "w") as out:
            json.dump(
                {"cpu_s": usage.ru_utime + usage.ru_stime, "requests": fake.stats["requests"], "pid": os.getpid()}, out
            )


if __name__ == "__main__":
    try:
        import uvloop  # the fleet must cost little CPU next to what it measures
    except ImportError:
        asyncio.run(main(sys.argv[1:]))
    else:
        uvloop.run(main(sys.argv[1:]))
