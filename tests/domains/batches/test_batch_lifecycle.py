"""A batch's life on the fake engine (tests/support/fake_engine.py), in process: lines that
complete, fail or time out end in the output and error files with their answers and the counts
and usage say so; a cancelled batch keeps the lines that finished; one past its completion
window expires; a retry runs exactly the lines that did not succeed."""

from __future__ import annotations

from tests.support.batches import cancel_in_cleanup, chat_line, create, results_by_custom_id, wait_for


def test_lines_complete_fail_or_time_out_into_the_output_and_error_files(fake_client):
    lines = [chat_line("ok-1"), chat_line("ok-2", max_tokens=5), chat_line("boom", "fake:fail")]
    lines.append(chat_line("late", "fake:timeout"))
    done = wait_for(fake_client, create(fake_client, lines).id, timeout=30)
    assert done.status == "completed"
    counts = done.request_counts
    assert (counts.total, counts.completed, counts.failed) == (4, 2, 2)
    output, errors = results_by_custom_id(fake_client, done)
    assert sorted(output) == ["ok-1", "ok-2"] and sorted(errors) == ["boom", "late"]
    answer = output["ok-2"]["response"]
    assert answer["status_code"] == 200
    assert answer["body"]["choices"][0]["message"]["content"] == "echo: Hello world!"
    assert answer["body"]["usage"]["completion_tokens"] == 5
    assert done.usage.output_tokens == 8 + 5  # chat_line asks 8 by default
    assert errors["boom"]["response"]["status_code"] == 500
    assert errors["late"]["response"]["status_code"] == 504
    assert errors["late"]["response"]["body"]["error"]["code"] == "request_timeout"


def test_cancel_mid_run_keeps_the_finished_lines(fake_client):
    lines = [chat_line(f"done-{i}") for i in range(3)] + [chat_line(f"stuck-{i}", "fake:stall") for i in range(3)]
    batch = create(fake_client, lines)
    try:
        wait_for(fake_client, batch.id, until=lambda b: b.request_counts.completed == 3, timeout=30)
        assert fake_client.batches.cancel(batch.id).status in ("cancelling", "cancelled")
    finally:
        ended = cancel_in_cleanup(fake_client, batch.id)
    assert ended.status == "cancelled" and ended.cancelled_at is not None
    output, errors = results_by_custom_id(fake_client, ended)
    assert sorted(output) == ["done-0", "done-1", "done-2"]
    assert {line["error"]["code"] for line in errors.values()} <= {"batch_cancelled"}


def test_a_batch_past_its_window_expires_with_its_finished_lines(fake_client):
    lines = [chat_line("quick")] + [chat_line(f"stuck-{i}", "fake:stall") for i in range(2)]
    # Room for a slow hour: the quick line must finish inside the window while the loop stalls.
    done = wait_for(fake_client, create(fake_client, lines, window="10s").id, timeout=60)
    assert done.status == "expired" and done.expired_at is not None
    output, errors = results_by_custom_id(fake_client, done)
    assert sorted(output) == ["quick"]
    assert {rid: line["error"]["code"] for rid, line in errors.items()} == {
        "stuck-0": "batch_expired",
        "stuck-1": "batch_expired",
    }


def test_a_retry_runs_exactly_the_lines_that_did_not_succeed(fake_client):
    lines = [chat_line("fine"), chat_line("flaky", "fake:fail")]
    first = wait_for(fake_client, create(fake_client, lines).id, timeout=30)
    assert (first.request_counts.completed, first.request_counts.failed) == (1, 1)
    retry = fake_client.post(f"/batches/{first.id}/retry", body={}, cast_to=dict)
    again = wait_for(fake_client, retry["id"], timeout=30)
    assert again.request_counts.total == 1
    _, errors = results_by_custom_id(fake_client, again)
    assert list(errors) == ["flaky"]
