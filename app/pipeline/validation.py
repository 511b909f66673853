"""Streaming validation of a batch input file (all-or-nothing, OpenAI's error codes).

Runs once per batch in `validating`; reads the file a chunk at a time, so memory holds only the
custom_ids' fingerprints (24 bytes a line, app/pipeline/id_set.py), never the file.

A chunk's lines are first checked together (`_Validator.feed_clean`: one JSON parse a line,
then each check over the whole chunk in C, W9's million lines at ~1-2 us each where line by
line took ~13); any chunk that is not clean throughout goes line by line (`feed_lines`), the
one path that words an error, so a refused file gets the same errors either way."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from app.core.line_errors import LineErrorCode, batch_error
from app.engine.protocol import LineChecker
from app.pipeline.id_set import CustomIdSet
from app.pipeline.jsonl import LineBlock, LineSplitter
from app.pipeline.lines import BadLine, parse_clean_lines, parse_line
from app.pipeline.output_tokens import generates, requested_cap
from app.pipeline.prefix_order import PrefixOrder
from app.pipeline.read_ahead import read_ahead
from app.pipeline.shards import ShardCutter


@dataclass
class ValidationResult:
    total: int = 0
    model: str | None = None
    errors: list[dict] = field(default_factory=list)
    shards: ShardCutter | None = None
    # Counted only when asked (a token limit applies): None otherwise.
    prompt_tokens: int | None = None
    # The same count per model (a Message Batch's requests may name several); empty when not counted.
    tokens_by_model: dict[str, int] = field(default_factory=dict)
    # Every valid line's place in the prefix order, when asked for one (else None).
    order: PrefixOrder | None = None
    # Counted with the tokens, for a batch's output bound: the output tokens the lines of a
    # generating endpoint cap themselves at, and the lines that set no cap with their prompt
    # tokens (the model's context length bounds those).
    capped_output_tokens: int = 0
    uncapped_lines: int = 0
    uncapped_prompt_tokens: int = 0


# Lines whose prompt tokens are counted in one call (the tokenizer encodes them as one batch).
TOKEN_CHUNK = 512


# A read chunk (~1 MiB) is checked this many bytes at a time: a 1 MiB block's ~9,500 parsed
# lines (~10 MB of objects) outgrow the CPU caches and the allocator's free arenas, 2.2 us a
# W9 line against ~1.5 at 64-256 KiB (and the validating replica's RSS grew past 100 MB).
CHECK_BYTES = 128 * 1024


async def _feed(validator: _Validator, splitter: LineSplitter, chunk: bytes | None) -> bool:
    """Check a chunk's lines in a thread (None: the file's last line, when it has no newline):
    a chunk is thousands of lines of CPU work, and the event loop must keep serving meanwhile
    (the lease heartbeat, the API). Then count their tokens."""
    going = await asyncio.to_thread(_check, validator, splitter, chunk)
    await validator.count_tokens()
    return going


def _check(validator: _Validator, splitter: LineSplitter, chunk: bytes | None) -> bool:
    if chunk is None:
        return validator.feed(splitter.end_block())
    for start in range(0, len(chunk), CHECK_BYTES):
        piece = chunk[start : start + CHECK_BYTES]
        if not validator.feed(splitter.feed_block(piece), piece):
            return False
    return True


# Input chunks (~1 MiB each) read ahead of the check. The event loop reads the socket only when
# it gets the GIL from the checking thread: with one chunk ahead, W9's thread waited for its
# next chunk 13% of its time. A few ahead, memory bounded by them.
READ_AHEAD_CHUNKS = 3


async def _as_read(chunk: bytes) -> bytes:
    """A chunk is read by pulling it from the stream: nothing more to read."""
    return chunk


def _offsets(block: LineBlock, lines: int) -> np.ndarray:
    """The byte offset of each of the block's first `lines` lines in the file."""
    newlines = np.flatnonzero(np.frombuffer(block.data, np.uint8) == ord("\n"))
    return block.first_offset + np.concatenate(([0], newlines[: lines - 1] + 1))


def _missing(name: str, line: int) -> dict:
    return batch_error(
        LineErrorCode.MISSING_REQUIRED_PARAMETER, f"Missing required parameter: '{name}'.", line=line, param=name
    )


class _Validator:
    def __init__(
        self,
        endpoint: str,
        checker: LineChecker,
        *,
        max_lines: int,
        max_errors: int,
        shard_lines: int,
        count_tokens: bool,
        per_request: bool,
        order: PrefixOrder | None,
        adapter_bases: Mapping[str, str],
        mixed_models: bool = False,
    ) -> None:
        self.endpoint = endpoint
        self.adapter_bases = adapter_bases
        self.checker = checker
        self.max_lines = max_lines
        self.max_errors = max_errors
        self.counting = count_tokens
        self.per_request = per_request
        self.mixed_models = mixed_models
        self.fallback_model: str | None = None
        self.custom_ids = CustomIdSet()
        self.cutter = ShardCutter(shard_lines)
        self.result = ValidationResult(shards=self.cutter, prompt_tokens=0 if count_tokens else None, order=order)
        self.valid_bodies: list[dict] = []  # checked since the last count: a chunk's at most

    def feed(self, block: LineBlock, chunk: bytes = b"") -> bool:
        """Check the lines of `block`, cut from `chunk` (spooled when ordering); False when
        validation must stop (too many lines or errors). Plain CPU and disk work: the caller
        runs it in a thread, off the event loop."""
        if self.result.order is not None:
            self.result.order.spool(chunk)
        return self.feed_clean(block) or self.feed_lines(block.lines())

    def feed_clean(self, block: LineBlock) -> bool:
        """Take the block's lines in one go if every one is a request that passes (no blank or
        refused line, no repeated custom_id, not past max_lines); else False, having changed
        nothing. Message Batches' lines (per_request: the batch's model is the first runnable
        one) always go line by line."""
        result = self.result
        lines = block.raw_lines()
        if self.per_request or self.mixed_models or result.total + len(lines) > self.max_lines:
            return False
        ordering = result.order is not None
        if ordering and b"\r" in block.data:  # the order keeps each line's length without its CR
            return False
        clean = parse_clean_lines(lines, self.endpoint, block.data)
        if clean is None:
            return False
        try:
            models = set(map(dict.get, clean.bodies, repeat("model")))
        except TypeError:  # a model that is a list or an object
            return False
        model = models.pop() if len(models) == 1 else None
        if not isinstance(model, str) or model == "" or not self._same_model(model):
            return False
        # Last, as it adds the ids: a chunk that fails on goes line by line against the ids before it.
        if not self.checker.lines_pass(self.endpoint, model, clean.bodies) or not self.custom_ids.add_all(
            clean.custom_ids
        ):
            return False
        offsets = _offsets(block, len(lines))
        self.cutter.add_run(block.first_line_no, offsets)
        result.total += len(lines)
        result.model = result.model or model
        if self.counting:
            self.valid_bodies.extend(clean.bodies)
        if result.order is not None:
            for n, (offset, size, body) in enumerate(zip(offsets.tolist(), map(len, lines), clean.bodies, strict=True)):
                result.order.add(offset, size, body, block.first_line_no + n)
        return True

    def feed_lines(self, lines: Iterable[tuple[int, int, bytes]]) -> bool:
        """Check `lines` (line number, byte offset, line) one by one; False when validation must stop."""
        result = self.result
        for line_no, offset, raw in lines:
            if not raw.strip():
                continue
            self.cutter.add(line_no, offset)
            result.total += 1
            if result.total > self.max_lines:
                message = f"The batch input file contains more than the maximum of {self.max_lines} requests."
                result.errors.append(batch_error(LineErrorCode.TOO_MANY_TASKS, message, line=line_no))
                return False
            error = self.check(line_no, offset, raw)
            if error is not None:
                result.errors.append(error)
                if len(result.errors) >= self.max_errors:
                    return False
        return True

    def check(self, line_no: int, offset: int, raw: bytes) -> dict | None:
        line = parse_line(line_no, raw, self.endpoint)
        if line is None:  # blank: feed skips those
            return None
        if isinstance(line, BadLine):
            return line.batch_error()
        custom_id = line.custom_id
        if not self.custom_ids.add(custom_id):
            return batch_error(
                LineErrorCode.DUPLICATE_CUSTOM_ID,
                f"The custom_id '{custom_id}' appears more than once in this batch; custom_ids must be unique.",
                line=line_no,
                param="custom_id",
            )
        error = self._check_body(line_no, line.body)
        if error is None and self.result.order is not None:
            self.result.order.add(offset, len(raw), line.body, line_no)
        return error

    def _check_body(self, line_no: int, body: dict) -> dict | None:
        if self.per_request:
            self._note_runnable_model(body)
            # A request that cannot run fails alone when it runs: only those that can are counted.
            if self.counting and self.checker.validate_line(self.endpoint, body) is None:
                self.valid_bodies.append(body)
            return None
        model = body.get("model")
        if model in (None, ""):
            return _missing("body.model", line_no)
        if self.mixed_models:
            return self._check_mixed(line_no, body)
        if self.result.model is None:
            self.result.model = model
        elif not self._same_model(model):
            return batch_error(
                LineErrorCode.MODEL_MISMATCH,
                f"All requests in a batch must use the same model; this line uses '{model}' but the "
                f"batch uses '{self.result.model}'.",
                line=line_no,
                param="body.model",
            )
        problem = self.checker.validate_line(self.endpoint, body)
        if problem is not None:
            return batch_error(problem.code, problem.message, line=line_no, param=problem.param)
        if self.counting:
            self.valid_bodies.append(body)
        return None

    def _check_mixed(self, line_no: int, body: dict) -> dict | None:
        """A line of a mixed-model batch: checked as any line against the model it names, but a
        model not served or that the project may not use is not the batch's error: the line fails
        alone when it runs. The batch's model is the first one a line can run on."""
        problem = self.checker.validate_line(self.endpoint, body)
        if problem is not None and problem.code == LineErrorCode.MODEL_NOT_FOUND:
            self.fallback_model = self.fallback_model or str(body.get("model"))
            return None
        if problem is not None:
            return batch_error(problem.code, problem.message, line=line_no, param=problem.param)
        if self.result.model is None:
            self.result.model = body["model"]
        if self.counting:
            self.valid_bodies.append(body)
        return None

    async def count_tokens(self) -> None:
        """Count the prompt tokens of the lines checked since the last call, model by model,
        TOKEN_CHUNK lines a call to the model's tokenizer, unless a line was refused: then the
        count is moot."""
        bodies, self.valid_bodies = self.valid_bodies, []
        if self.result.errors:
            return
        by_model: dict[str, list[dict]] = {}
        for body in bodies:
            by_model.setdefault(str(body["model"]), []).append(body)
        for model, group in by_model.items():
            for start in range(0, len(group), TOKEN_CHUNK):
                chunk = group[start : start + TOKEN_CHUNK]
                counts = await self.checker.count_prompt_tokens(self.endpoint, chunk)
                tokens = sum(counts)
                self.result.prompt_tokens = (self.result.prompt_tokens or 0) + tokens
                self.result.tokens_by_model[model] = self.result.tokens_by_model.get(model, 0) + tokens
                if generates(self.endpoint):
                    self._bound_output(chunk, counts)

    def _same_model(self, model: object) -> bool:
        """Whether a line naming ``model`` belongs in this batch: the batch's model, or (LoRA
        adapters) a model on the same base, which one engine serves."""
        batch_model = self.result.model
        if batch_model is None or model == batch_model:
            return True
        if not isinstance(model, str):
            return False
        bases = self.adapter_bases
        return bases.get(model, model) == bases.get(batch_model, batch_model)

    def _bound_output(self, bodies: list[dict], prompt_tokens: list[int]) -> None:
        result = self.result
        for body, tokens in zip(bodies, prompt_tokens, strict=True):
            cap = requested_cap(self.endpoint, body)
            if cap is None:
                result.uncapped_lines += 1
                result.uncapped_prompt_tokens += tokens
            else:
                result.capped_output_tokens += cap

    def _note_runnable_model(self, body: dict) -> None:
        """The batch's model (its engine window and admission gate) is the first one a line
        can run on; lines of other or unknown models run on the same window and fail alone."""
        model = body.get("model")
        if not isinstance(model, str) or self.result.model is not None:
            return
        if self.checker.validate_line(self.endpoint, body) is None:
            self.result.model = model
        else:
            self.fallback_model = self.fallback_model or model


async def validate_input_file(
    chunks: AsyncIterator[bytes],
    endpoint: str,
    checker: LineChecker,
    *,
    max_lines: int,
    max_errors: int,
    shard_lines: int,
    count_tokens: bool = False,
    per_request: bool = False,
    order: PrefixOrder | None = None,
    adapter_bases: Mapping[str, str] | None = None,
    mixed_models: bool = False,
) -> ValidationResult:
    """Check every line of the streamed file; on the way, cut it into shards of `shard_lines`
    requests, each starting at the byte offset of its first request line, and with
    `count_tokens` count the prompt tokens of the lines, TOKEN_CHUNK lines a tokenizer call.
    With `per_request` (Anthropic's rule) a line's body is not checked here: it fails alone when it runs.
    With `order`, the file is spooled into it and every valid line gets its place in the prefix order.
    `adapter_bases` (LoRA adapter -> its base) lets lines name a base model and its adapters.
    With `mixed_models`, lines may name any model; one naming a model that cannot run fails alone."""
    validator = _Validator(
        endpoint,
        checker,
        max_lines=max_lines,
        max_errors=max_errors,
        shard_lines=shard_lines,
        count_tokens=count_tokens,
        per_request=per_request,
        order=order,
        adapter_bases=adapter_bases or {},
        mixed_models=mixed_models,
    )
    splitter = LineSplitter()
    # The next chunks are read (from S3, say) while a thread checks this one.
    async with aclosing(read_ahead(chunks, _as_read, READ_AHEAD_CHUNKS)) as reading:
        async for chunk, _ in reading:
            if not await _feed(validator, splitter, chunk):
                break
        else:  # read to the end: the last line, when it has no newline
            await _feed(validator, splitter, None)
    result = validator.result
    if result.total == 0:
        result.errors.append(batch_error(LineErrorCode.EMPTY_FILE, "The batch input file is empty."))
    if (per_request or mixed_models) and result.model is None:
        result.model = validator.fallback_model or "unknown"
    return result
