"""`batchd run-batch --retry-failed PREVIOUS_OUTPUT`: the command as users type it, in process,
its engine a fake that fails chosen lines on their first attempt (a fault to inject; the real
engine's lines are tested in test_run_batch.py). The second run runs exactly the failed lines."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from app import cli
from app.engine.results import LineResult
from app.runbatch import runner
from tests.support.batches import CHAT_MODEL, chat_line, jsonl


class FlakyEngines:
    """Answers every chat line, except that a line whose text starts with `flaky` gets a 400 on
    its first attempt; `attempts` counts the lines run by their text (a test clears it between runs)."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self._failed: set[str] = set()

    def suggested_concurrency(self, model: str) -> int:
        return 4

    async def execute(self, endpoint, body, request_id, priority=0, urgency=None) -> LineResult:
        text = body["messages"][-1]["content"]
        self.attempts[text] += 1
        if text.startswith("flaky") and text not in self._failed:
            self._failed.add(text)
            error = {"message": "try again", "type": "BadRequestError", "param": None, "code": 400}
            return LineResult(400, {"error": error})
        answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": f"re: {text}"}}]}
        return LineResult(200, answer)

    async def abort(self, request_id) -> bool:
        return False


@pytest.fixture
def engines(monkeypatch) -> FlakyEngines:
    fake = FlakyEngines()

    async def main(options):
        return await runner.run_batch(options, fake)

    monkeypatch.setattr(runner, "main", main)  # cli._run_batch imports it at call time
    return fake


INPUT = (
    jsonl([chat_line(f"ok-{i}", f"steady {i}") for i in range(5)])
    + b"{not json\n"
    + jsonl([chat_line(f"flaky-{i}", f"flaky {i}") for i in range(3)])
    + jsonl([{"custom_id": "no-body", "method": "POST", "url": "/v1/chat/completions"}])
)


def _run_batch(tmp_path: Path, *args: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_bytes(INPUT)
    argv = ["run-batch", "-i", str(source), "--model", CHAT_MODEL, "--data-dir", str(tmp_path / "data"), *args]
    assert cli.main(argv) == 0


def _lines(path: Path) -> dict[str | None, dict]:
    lines = [json.loads(raw) for raw in path.read_bytes().splitlines()]
    by_id = {line["custom_id"]: line for line in lines}
    assert len(by_id) == len(lines), "a custom_id written twice"
    return by_id


def _status(line: dict) -> int | str:
    return line["response"]["status_code"] if line["response"] else line["error"]["code"]


def test_retry_of_an_inline_output_runs_only_its_failed_lines(tmp_path, engines, capsys):
    _run_batch(tmp_path, "-o", str(tmp_path / "first.jsonl"))
    first = _lines(tmp_path / "first.jsonl")
    assert {cid: _status(line) for cid, line in first.items()} == {
        **{f"ok-{i}": 200 for i in range(5)},
        **{f"flaky-{i}": 400 for i in range(3)},
        None: "invalid_json_line",
        "no-body": "missing_required_parameter",
    }
    engines.attempts.clear()

    _run_batch(tmp_path, "-o", str(tmp_path / "second.jsonl"), "--retry-failed", str(tmp_path / "first.jsonl"))
    second = _lines(tmp_path / "second.jsonl")
    # The engine ran the three failed requests again and nothing else; the two lines no engine can
    # run fail again alike; the lines that succeeded are in the first output only.
    assert engines.attempts == {f"flaky {i}": 1 for i in range(3)}
    assert {cid: _status(line) for cid, line in second.items()} == {
        **{f"flaky-{i}": 200 for i in range(3)},
        None: "invalid_json_line",
        "no-body": "missing_required_parameter",
    }
    assert second["flaky-1"]["response"]["body"]["choices"][0]["message"]["content"] == "re: flaky 1"
    assert "done: 5 lines (ok 3, failed 2" in capsys.readouterr().err


def test_retry_from_an_error_file_into_a_new_output_and_error_file(tmp_path, engines):
    _run_batch(tmp_path, "-o", str(tmp_path / "out.jsonl"), "--error-file", str(tmp_path / "errors.jsonl"))
    assert set(_lines(tmp_path / "out.jsonl")) == {f"ok-{i}" for i in range(5)}
    engines.attempts.clear()

    _run_batch(
        tmp_path,
        "-o",
        str(tmp_path / "retried.jsonl"),
        "--error-file",
        str(tmp_path / "still-failing.jsonl"),
        "--retry-failed",
        str(tmp_path / "errors.jsonl"),
    )
    assert engines.attempts == {f"flaky {i}": 1 for i in range(3)}
    assert set(_lines(tmp_path / "retried.jsonl")) == {f"flaky-{i}" for i in range(3)}
    assert set(_lines(tmp_path / "still-failing.jsonl")) == {None, "no-body"}


def test_retry_refuses_to_overwrite_the_output_it_reads(tmp_path, engines):
    _run_batch(tmp_path, "-o", str(tmp_path / "first.jsonl"))
    before = (tmp_path / "first.jsonl").read_bytes()
    engines.attempts.clear()
    with pytest.raises(ValueError, match="write the new one elsewhere"):
        _run_batch(tmp_path, "-o", str(tmp_path / "first.jsonl"), "--retry-failed", str(tmp_path / "first.jsonl"))
    assert (tmp_path / "first.jsonl").read_bytes() == before and not engines.attempts


def test_retry_resumes_after_an_interruption(tmp_path, engines):
    """A retry interrupted after one line wrote: --resume runs the other failed lines only."""
    _run_batch(tmp_path, "-o", str(tmp_path / "first.jsonl"))
    first = _lines(tmp_path / "first.jsonl")
    engines.attempts.clear()
    written = json.dumps({**first["flaky-0"], "response": {**first["flaky-0"]["response"], "status_code": 200}})
    (tmp_path / "second.jsonl.partial").write_text(written + "\n")

    retry = ["-o", str(tmp_path / "second.jsonl"), "--retry-failed", str(tmp_path / "first.jsonl"), "--resume"]
    _run_batch(tmp_path, *retry)
    assert engines.attempts == {"flaky 1": 1, "flaky 2": 1}
    assert set(_lines(tmp_path / "second.jsonl")) == {"flaky-0", "flaky-1", "flaky-2", None, "no-body"}
