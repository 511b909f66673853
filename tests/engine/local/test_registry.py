"""EngineRegistry against real vLLM engines on the two built-in models.

Engines start once for the module (see conftest). The engine-death test must
stay last: it kills the engines the other tests share.
"""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import time

import psutil
import pytest

from app.engine.config.catalog import MINILM_NAME
from app.engine.config.tiny_chat import TINY_CHAT_NAME
from app.engine.errors import EngineNotReadyError, RequestAborted
from app.engine.local.registry import EngineRegistry
from harness.poll import wait_until_async

CHAT = "/v1/chat/completions"


def chat_body(content: str = "Hello, who are you?", **extra):
    return {
        "model": TINY_CHAT_NAME,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": 12,
        "temperature": 0,
        **extra,
    }


def test_models_and_endpoints(registry):
    cards = registry.model_cards()
    assert [c["id"] for c in cards] == [TINY_CHAT_NAME, MINILM_NAME]
    assert all(c["object"] == "model" and isinstance(c["created"], int) for c in cards)
    assert all(set(c) == {"id", "object", "created", "owned_by"} for c in cards)

    assert registry.ready
    assert registry.endpoints_for(TINY_CHAT_NAME) == {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/messages",
    }
    assert registry.endpoints_for(MINILM_NAME) == {"/v1/embeddings", "/v1/score", "/v1/rerank"}
    assert registry.endpoints_for("nope") == set()
    assert registry.suggested_concurrency(TINY_CHAT_NAME) >= 2


def test_front_end_and_engine_cores_run_off_the_workers_cpus(registry):
    """vLLM binds each CPU worker to part of the CPUs; everything else is pinned to the rest,
    so the front-end's work never takes CPU time from a worker."""
    # This registry's engine cores are children of this process; a session's `batchd serve`
    # subprocesses (their own engines, pinned by themselves) are left aside.
    cores = [p for p in psutil.Process().children() if _title(p).startswith("VLLM::EngineCore")]
    workers = [w for core in cores for w in core.children() if _title(w).startswith("VLLM::Worker")]
    assert len(workers) == 2 and len(cores) == 2
    worker_cpus = set().union(*(set(p.cpu_affinity()) for p in workers))
    before = registry._cpus_before_pinning
    assert before is not None and worker_cpus < before, "vLLM should leave CPUs beside the workers"
    for process in [psutil.Process(), *cores]:
        for thread in process.threads():
            assert os.sched_getaffinity(thread.id) == before - worker_cpus, _title(process)


def _title(process: psutil.Process) -> str:
    return (process.cmdline() or [""])[0]


def test_chat_completion(registry, run):
    result = run(registry.execute(CHAT, chat_body(), "chat-1"))

    assert result.status_code == 200, result.body
    body = result.body
    assert body["object"] == "chat.completion"
    assert body["id"].startswith("chatcmpl-")
    assert body["model"] == TINY_CHAT_NAME
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert isinstance(body["choices"][0]["message"]["content"], str)
    assert body["usage"]["completion_tokens"] == 12
    assert result.usage.input_tokens == body["usage"]["prompt_tokens"] > 0
    assert result.usage.output_tokens == 12


def test_engines_schedule_by_priority_and_lines_carry_theirs(registry, run, monkeypatch):
    """The engine's waiting queue orders lines as batchd does: each line reaches vLLM with
    the priority it was executed with, in place of any its body names; 0 stays vLLM's default."""
    engine = registry._engines[TINY_CHAT_NAME]
    assert engine.llm.vllm_config.scheduler_config.policy == "priority"
    seen: list[int] = []
    generate = engine.llm.generate

    def recording(*args, **kwargs):
        seen.append(kwargs["priority"])
        return generate(*args, **kwargs)

    monkeypatch.setattr(engine.llm, "generate", recording)

    async def lines():
        return await asyncio.gather(
            registry.execute(CHAT, chat_body(), "prio-1", priority=70_000_000),
            registry.execute(CHAT, chat_body(priority=-5), "prio-2", priority=90_000_000),
            registry.execute(CHAT, chat_body(), "prio-3"),
        )

    assert [r.status_code for r in run(lines())] == [200, 200, 200]
    assert sorted(seen) == [0, 70_000_000, 90_000_000]


def test_temperature_zero_is_deterministic(registry, run):
    async def two():
        return await asyncio.gather(
            registry.execute(CHAT, chat_body("Tell me a story"), "det-1"),
            registry.execute(CHAT, chat_body("Tell me a story"), "det-2"),
        )

    first, second = run(two())
    third = run(registry.execute(CHAT, chat_body("Tell me a story"), "det-3"))
    texts = {r.body["choices"][0]["message"]["content"] for r in (first, second, third)}
    assert len(texts) == 1


def test_completion_azure_style_url(registry, run):
    body = {"model": TINY_CHAT_NAME, "prompt": "Once upon a time", "max_tokens": 5, "temperature": 0}
    result = run(registry.execute("/completions", body, "cmpl-1"))

    assert result.status_code == 200, result.body
    assert result.body["object"] == "text_completion"
    assert isinstance(result.body["choices"][0]["text"], str)
    assert result.usage.output_tokens == 5


def test_responses(registry, run):
    body = {"model": TINY_CHAT_NAME, "input": "Hello", "max_output_tokens": 6, "temperature": 0}
    result = run(registry.execute("/v1/responses", body, "resp-1"))

    assert result.status_code == 200, result.body
    assert result.body["object"] == "response"
    assert result.body["id"].startswith("resp_")
    assert result.body["output"][0]["type"] == "message"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 6


def test_embeddings(registry, run):
    body = {"model": MINILM_NAME, "input": ["A cat sits on the mat.", "A kitten rests on a rug.", "Stock prices fell."]}
    result = run(registry.execute("/v1/embeddings", body, "emb-1"))

    assert result.status_code == 200, result.body
    assert result.body["object"] == "list"
    vectors = [item["embedding"] for item in result.body["data"]]
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 0

    def cosine(a, b):
        return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))

    # Real embeddings: paraphrases are closer than unrelated sentences.
    assert cosine(vectors[0], vectors[1]) > cosine(vectors[0], vectors[2]) + 0.3


def test_score_and_rerank(registry, run):
    score = run(
        registry.execute(
            "/score",
            {"model": MINILM_NAME, "queries": "a cat", "documents": ["a kitten", "a truck"]},
            "score-1",
        )
    )
    rerank = run(
        registry.execute(
            "/v1/rerank",
            {"model": MINILM_NAME, "query": "a cat", "documents": ["a truck", "a kitten"]},
            "rerank-1",
        )
    )

    assert score.status_code == 200, score.body
    assert [d["object"] for d in score.body["data"]] == ["score", "score"]
    assert score.body["data"][0]["score"] > score.body["data"][1]["score"]
    assert rerank.status_code == 200, rerank.body
    assert rerank.body["results"][0]["document"]["text"] == "a kitten"
    assert rerank.usage.input_tokens > 0


def test_overlong_prompt_is_a_400_line(registry, run):
    result = run(registry.execute(CHAT, chat_body("hello " * 3000), "long-1"))

    assert result.status_code == 400
    error = result.body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert "maximum context length" in error["message"]
    assert result.usage.input_tokens == 0


def test_bad_lines_become_error_results(registry, run):
    invalid = run(registry.execute(CHAT, {"model": TINY_CHAT_NAME}, "bad-1"))
    unknown = run(registry.execute(CHAT, chat_body(model="gpt-4o"), "bad-2"))
    wrong_endpoint = run(registry.execute("/v1/embeddings", chat_body(), "bad-3"))
    stream = run(registry.execute(CHAT, chat_body(stream=True), "bad-4"))

    assert (invalid.status_code, invalid.body["error"]["param"]) == (400, "body.messages")
    assert (unknown.status_code, unknown.body["error"]["type"]) == (404, "NotFoundError")
    assert wrong_endpoint.status_code == 404
    assert (stream.status_code, stream.body["error"]["param"]) == (400, "stream")


def test_validate_line(registry):
    assert registry.validate_line(CHAT, chat_body()) is None
    assert registry.validate_line("/embeddings", {"model": MINILM_NAME, "input": "x"}) is None

    problem = registry.validate_line(CHAT, chat_body(stream=True))
    assert (problem.code, problem.param) == ("streaming_unsupported", "body.stream")

    problem = registry.validate_line(CHAT, {"model": TINY_CHAT_NAME, "messages": "hi"})
    assert (problem.code, problem.param) == ("invalid_request", "body.messages")

    problem = registry.validate_line(CHAT, chat_body(max_tokens="many"))
    assert (problem.code, problem.param) == ("invalid_request", "body.max_tokens")

    problem = registry.validate_line(CHAT, chat_body(model="gpt-4o"))
    assert (problem.code, problem.param) == ("model_not_found", "body.model")

    problem = registry.validate_line(CHAT, {"messages": []})
    assert (problem.code, problem.param) == ("missing_required_parameter", "body.model")

    problem = registry.validate_line("/v1/embeddings", chat_body())
    assert (problem.code, problem.param) == ("unsupported_endpoint", "url")

    problem = registry.validate_line("/v1/moderations", chat_body())
    assert (problem.code, problem.param) == ("url_mismatch", "url")

    problem = registry.validate_line("/v1/embeddings", {"model": MINILM_NAME, "input": "x", "encoding_format": "bytes"})
    assert (problem.code, problem.param) == ("invalid_request", "body.encoding_format")


def test_abort_mid_generation(registry, run):
    long_body = chat_body(max_tokens=2000, ignore_eos=True)

    async def scenario():
        task = asyncio.create_task(registry.execute(CHAT, long_body, "abort-1"))
        llm = registry._engines[TINY_CHAT_NAME].llm
        await wait_until_async(lambda: llm.get_num_unfinished_requests() == 1, 10, "abort-1 in the engine")
        started = time.monotonic()
        assert await registry.abort("abort-1") is True
        with pytest.raises(RequestAborted):
            await task
        return time.monotonic() - started

    assert run(scenario()) < 1.0
    assert run(registry.abort("abort-1")) is False
    # The engine is still healthy and serves the next line.
    assert run(registry.execute(CHAT, chat_body(), "after-abort")).status_code == 200


def test_cancelling_the_caller_is_not_an_abort(registry, run):
    """An abort (``registry.abort``) ends ``execute`` with RequestAborted, a line the worker
    knows it stopped; cancelling the caller (shutdown, a lost lease) propagates
    CancelledError, and wins when both happen. Either way vLLM stops generating."""
    llm = registry._engines[TINY_CHAT_NAME].llm
    long_body = chat_body(max_tokens=2000, ignore_eos=True)

    async def generating(request_id: str) -> asyncio.Task:
        task = asyncio.create_task(registry.execute(CHAT, long_body, request_id))
        await wait_until_async(lambda: llm.get_num_unfinished_requests() == 1, 10, f"{request_id} is in the engine")
        return task

    async def scenario():
        cancelled = await generating("cancel-1")
        cancelled.cancel()
        with pytest.raises(asyncio.CancelledError):
            await cancelled
        # Not recorded as aborted, and no longer in flight: there is nothing left to abort.
        assert await registry.abort("cancel-1") is False
        await wait_until_async(lambda: llm.get_num_unfinished_requests() == 0, 10, "vLLM dropped cancel-1")

        both = await generating("cancel-2")
        assert await registry.abort("cancel-2") is True
        both.cancel()
        with pytest.raises(asyncio.CancelledError):
            await both
        await wait_until_async(lambda: llm.get_num_unfinished_requests() == 0, 10, "vLLM dropped cancel-2")

    run(scenario())
    # The engine is still healthy and serves the next line.
    assert run(registry.execute(CHAT, chat_body(), "after-cancel")).status_code == 200


# Lines the lean chat path answers (app/engine/local/fast_chat.py), each compared with the
# serving class's answer to the same line.
FAST_LINES = [
    chat_body(),
    chat_body(max_tokens=None, max_completion_tokens=7),
    chat_body(seed=7, user="someone", metadata={"team": "a"}, n=1, stream=False, logprobs=False),
    chat_body(stop=["e", " t"], max_tokens=30),
    chat_body(stop_token_ids=[5, 6], max_tokens=30, include_stop_str_in_output=True),
    chat_body(max_tokens=20, ignore_eos=True, top_p=0.9, top_k=5, repetition_penalty=1.1, frequency_penalty=0.5),
    {
        **chat_body(),
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": [{"type": "text", "text": "Two"}, {"type": "text", "text": "parts"}]},
        ],
    },
    chat_body(cache_salt="a-projects-salt"),  # every line batchd runs has one (app/pipeline/cache_salt.py)
]
# Lines the lean path leaves to the serving class (what they need, or an error it reports).
SERVING_LINES = [
    chat_body(logprobs=True, top_logprobs=2),
    chat_body(n=2),
    chat_body(echo=True),
    chat_body(response_format={"type": "json_object"}),
    chat_body(max_tokens=5000),
    chat_body("hello " * 3000),
    {**chat_body(), "messages": [{"role": "user", "content": "Hi", "name": "ann"}]},
    {**chat_body(), "messages": [{"role": "developer", "content": "Hi"}]},
    chat_body(tools=[{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]),
]


def _comparable(reply):
    status, body = reply
    assert body.get("id", "chatcmpl-").startswith("chatcmpl-")
    # Field order too: the lines are written as these dicts serialise.
    return status, json.dumps({k: v for k, v in body.items() if k not in ("id", "created")})


def test_fast_chat_path_answers_what_the_serving_class_answers(registry, run, monkeypatch):
    engine = registry._engines[TINY_CHAT_NAME]
    fast = engine.fast_chat
    assert fast is not None, "the tiny chat model qualifies for the lean path"
    fast_lines = []
    fast_run = fast.run

    async def recording(line):
        fast_lines.append(line.request_id)
        return await fast_run(line)

    monkeypatch.setattr(fast, "run", recording)
    bodies = FAST_LINES + SERVING_LINES

    async def answers():
        return await asyncio.gather(*(engine.run(CHAT, copy.deepcopy(b)) for b in bodies))

    lean = run(answers())
    assert len(fast_lines) == len(FAST_LINES)
    monkeypatch.setattr(engine, "fast_chat", None)
    serving = run(answers())
    for body, lean_reply, serving_reply in zip(bodies, lean, serving, strict=True):
        assert _comparable(lean_reply) == _comparable(serving_reply), body
    assert [status for status, _ in lean] == [200] * len(FAST_LINES) + [200, 400, 200, 200, 400, 400, 200, 200, 400]
    assert "maximum context length" in lean[len(FAST_LINES) + 5][1]["error"]["message"]
    # The stop strings did stop a line (the comparison covers stop_reason).
    assert lean[3][1]["choices"][0]["stop_reason"] in ("e", " t"), lean[3]


def test_fast_chat_path_passes_the_serving_class_sampling(registry, run, monkeypatch):
    """Default max_tokens (the context left after the prompt) and the model's generation
    defaults reach the engine as the serving class sends them; the lines stop at the engine."""
    engine = registry._engines[TINY_CHAT_NAME]
    sent = []

    def recording(prompt, params, request_id, **kwargs):
        sent.append((prompt["prompt_token_ids"], prompt.get("cache_salt"), repr(params), kwargs.get("priority")))
        raise RuntimeError("stop here")

    monkeypatch.setattr(engine.llm, "generate", recording)
    body = chat_body(max_tokens=None, priority=3, cache_salt="the-projects-salt")
    fast = engine.fast_chat
    replies = [run(engine.run(CHAT, copy.deepcopy(body)))]
    monkeypatch.setattr(engine, "fast_chat", None)
    replies.append(run(engine.run(CHAT, copy.deepcopy(body))))
    assert replies[0] == replies[1] and replies[0][0] == 500
    assert sent[0] == sent[1] and sent[0][1] == "the-projects-salt"  # the salt reaches the engine
    assert f"max_tokens={2048 - len(sent[0][0])}," in sent[0][2]
    assert fast is not None


def test_not_ready_before_start():
    with pytest.raises(EngineNotReadyError):
        EngineRegistry().validate_line(CHAT, chat_body())


def test_a_killed_engine_core_is_restarted_and_the_line_runs_again(registry, run):
    # Must stay the last test of this module: it kills a shared engine.
    core = next(p for p in registry._processes[TINY_CHAT_NAME][0] if _title(p).startswith("VLLM::EngineCore"))
    core.kill()

    async def after_death():
        problems = await wait_until_async(registry.engine_problems, 30, "the registry to restart its engine", 0.2)
        assert not registry.ready
        # The line waits for the restart and runs on the new engine.
        result = await registry.execute(CHAT, chat_body(), "after-death-1")
        return problems, result

    problems, result = run(after_death())
    assert problems == {TINY_CHAT_NAME: "its engine is restarting"}
    assert result.status_code == 200 and result.body["object"] == "chat.completion"
    assert registry.ready and registry.engine_state(TINY_CHAT_NAME) == "ready"
    assert not core.is_running()
