"""W10's pure logic on synthetic runs (no engine): the plan and the servers' flags, the measures
(busy time, loads, finishes, line tallies), the goals over rounds and the report."""

from __future__ import annotations

import json

from bench.workloads import WORKLOADS
from bench.workloads.w10.checks import goal_checks, round_ratios
from bench.workloads.w10.measure import (
    Sample,
    batch_row,
    busy_seconds,
    counter_delta,
    engine_timeline,
    line_tally,
    loads_seen,
    swapping_seconds,
    system_measures,
)
from bench.workloads.w10.plan import (
    BUDGET,
    CHAT,
    CHAT_B,
    EMBED,
    RESIDENT,
    Planned,
    batch_lines,
    round_plan,
    serve_args,
    write_config,
)
from bench.workloads.w10.report import render
from bench.workloads.w10.workload import W10EnginesOnDemand, run_failed

CLEAN = {"expected": 10, "output": 10, "failed": 0, "lost": 0, "duplicated": 0, "unexpected": 0}


def test_the_plan_creates_each_models_24h_batches_then_a_1h_batch_each():
    day, hour = round_plan(1.0)
    assert {b.window for b in day} == {"24h"} and {b.window for b in hour} == {"1h"}
    assert sorted(b.model for b in day) == sorted([CHAT, CHAT, CHAT_B, CHAT_B, EMBED, EMBED])
    assert [b.model for b in hour] == [CHAT, CHAT_B, EMBED]
    assert day[0].model == EMBED  # the 24h wave starts with the model not loaded at start
    ids = [i for b in day + hour for i in b.custom_ids()]
    assert len(ids) == len(set(ids)) == sum(b.lines for b in day + hour)
    # --scale shrinks every batch, never to nothing.
    small_day, small_hour = round_plan(0.0001)
    assert {b.lines for b in small_day + small_hour} == {1}
    assert [b.lines for b in round_plan(0.1)[1]] == [round(b.lines * 0.1) for b in hour]


def test_a_batchs_lines_name_its_model_and_endpoint():
    chat = [json.loads(line) for line in batch_lines(Planned("chat-b-1h", CHAT_B, "1h", 3)).splitlines()]
    assert [line["custom_id"] for line in chat] == ["chat-b-1h-0", "chat-b-1h-1", "chat-b-1h-2"]
    assert {line["url"] for line in chat} == {"/v1/chat/completions"}
    assert {line["body"]["model"] for line in chat} == {CHAT_B} and chat[0]["body"]["max_tokens"] == 12
    embed = json.loads(batch_lines(Planned("embed-24h-1", EMBED, "24h", 1)))
    assert embed["url"] == "/v1/embeddings" and embed["body"]["model"] == EMBED and "input" in embed["body"]


def test_both_systems_serve_the_same_three_models_and_only_the_budget_has_a_limit(tmp_path):
    config = write_config(tmp_path / "models.json", eager=True)
    budget, resident = serve_args(BUDGET, config), serve_args(RESIDENT, config)
    assert budget[-2:] == ["--max-resident-engines", "1"] and "--max-resident-engines" not in resident
    assert budget[:-2] == resident
    models = [resident[i + 1] for i, flag in enumerate(resident) if flag == "--model"]
    assert models == [CHAT, f"{CHAT_B}={CHAT}", EMBED]
    written = json.loads(config.read_text())["models"]
    assert set(written) == {CHAT, CHAT_B, EMBED}
    assert all(m["engine_args"] == {"enforce_eager": True} for m in written.values())
    assert json.loads(write_config(tmp_path / "compiled.json", eager=False).read_text()) == {"models": {}}


def _sample(t: float, loaded: dict[str, bool], in_flight: dict[str, int]) -> Sample:
    return Sample(t, loaded, in_flight)


def test_busy_is_an_engine_loaded_with_lines_in_flight_not_lines_waiting_for_one():
    samples = [
        _sample(0.0, {CHAT: True, EMBED: False}, {CHAT: 0, EMBED: 40}),  # embed's lines wait: idle
        _sample(1.0, {CHAT: True, EMBED: False}, {CHAT: 5, EMBED: 40}),  # busy
        _sample(2.0, {CHAT: False, EMBED: False}, {CHAT: 0, EMBED: 40}),  # swapping: idle
        _sample(4.0, {CHAT: False, EMBED: True}, {CHAT: 0, EMBED: 40}),  # busy until the end
    ]
    assert busy_seconds(samples, end=5.0) == 2.0
    # Samples past the end count up to it only; a later first sample leaves the start idle.
    assert busy_seconds(samples, end=4.5) == 1.5
    assert busy_seconds(samples[1:], end=2.0) == 1.0
    assert swapping_seconds(samples, end=5.0) == 2.0  # 2-4 s: neither engine loaded
    assert loads_seen(samples) == 1
    assert engine_timeline(samples) == [[0.0, CHAT, "loaded"], [2.0, CHAT, "unloaded"], [4.0, EMBED, "loaded"]]


def test_counters_are_the_rounds_delta_and_lines_are_tallied_by_custom_id():
    assert counter_delta({CHAT: 1.0}, {CHAT: 3.0, EMBED: 2.0}) == {CHAT: 2.0, EMBED: 2.0}
    tally = line_tally(["a", "b", "c", "d"], output_ids=["a", "b", "b"], error_ids=["c", "x"])
    assert tally == {"expected": 4, "output": 3, "failed": 2, "lost": 1, "duplicated": 1, "unexpected": 1}


def _rows(hour_finish: float, makespan: float, status: str = "completed", lost: int = 0) -> list[dict]:
    hour = Planned("chat-1h", CHAT, "1h", 10)
    day = Planned("embed-24h-1", EMBED, "24h", 10)
    return [
        batch_row(day, 0.0, makespan, "completed", CLEAN),
        batch_row(hour, 2.0, 2.0 + hour_finish, status, {**CLEAN, "lost": lost}),
    ]


def test_a_systems_measures_from_its_batches_samples_and_counters():
    rows = _rows(hour_finish=30.0, makespan=100.0)
    samples = [_sample(0.0, {CHAT: True}, {CHAT: 3}), _sample(50.0, {CHAT: True}, {CHAT: 0})]
    m = system_measures(rows, samples, {CHAT: 0.0, EMBED: 3.0}, {EMBED: 24.5})
    assert (m["makespan_s"], m["busy_s"], m["busy_fraction"], m["idle_waiting_s"]) == (100.0, 50.0, 0.5, 50.0)
    assert (m["loads"], m["loads_by_model"], m["load_seconds"]) == (3, {EMBED: 3}, 24.5)
    assert m["no_engine_s"] == 0.0
    assert m["worst_1h_finish_s"] == 30.0 and m["hour_batches_missed"] == [] and m["deadlines_missed"] == []
    # A 1h batch that ends past its hour, or fails, misses its deadline.
    late = system_measures(_rows(hour_finish=3700.0, makespan=4000.0), [], {}, {})
    assert late["hour_batches_missed"] == ["chat-1h"] and late["batches_not_completed"] == []
    failed = system_measures(_rows(hour_finish=5.0, makespan=90.0, status="failed", lost=10), [], {}, {})
    assert failed["batches_not_completed"] == ["chat-1h"] and failed["lines_lost"] == 10


def _run(makespan: float, loads: int = 3, load_seconds: float = 30.0, hour_missed: tuple[str, ...] = ()) -> dict:
    return {
        "makespan_s": makespan,
        "loads": loads,
        "loads_by_model": {EMBED: loads},
        "load_seconds": load_seconds,
        "busy_fraction": 0.7,
        "worst_1h_finish_s": 40.0,
        "hour_batches_missed": list(hour_missed),
        "batches_not_completed": [],
        "lines_lost": 0,
        "lines_duplicated": 0,
        "startup_s": 60.0,
        "timeline": [[0.0, CHAT, "loaded"]],
        "batches": _rows(30.0, makespan),
    }


def _round(n: int, budget: dict, resident: dict) -> dict:
    r = {"round": n, "order": [BUDGET, RESIDENT], "systems": {BUDGET: budget, RESIDENT: resident}}
    return {**r, "ratios": round_ratios(r)}


def _passes(rounds: list[dict]) -> list[bool | None]:
    return [c["pass"] for c in goal_checks(rounds)]


def test_the_goals_pass_on_a_good_run_and_take_the_median_of_same_round_ratios():
    rounds = [
        _round(1, _run(180.0, load_seconds=60.0), _run(100.0)),  # 1.8x, work 1.2x
        _round(2, _run(300.0, load_seconds=60.0), _run(100.0)),  # 3.0x, work 2.4x: an outlier round
        _round(3, _run(200.0, load_seconds=90.0, loads=4), _run(100.0)),  # 2.0x, work 1.1x
    ]
    assert rounds[0]["ratios"] == {"makespan": 1.8, "work": 1.2}
    checks = goal_checks(rounds)
    assert [c["pass"] for c in checks] == [True, True, True, True, True]
    assert checks[1]["measure"] == 2.0 and checks[1]["value"] == "2.00x (1.80, 3.00, 2.00)"
    assert checks[2]["measure"] == 1.2 and checks[3]["measure"] == 4


def test_each_goal_fails_on_its_own_miss():
    good_budget, resident = _run(180.0, load_seconds=60.0), _run(100.0)
    assert _passes([_round(1, good_budget, resident)]) == [True] * 5
    missed = _run(180.0, load_seconds=60.0, hour_missed=("chat-1h",))
    assert _passes([_round(1, missed, resident)]) == [False, True, True, True, True]
    assert _passes([_round(1, _run(260.0, load_seconds=150.0), resident)]) == [True, False, True, True, True]
    assert _passes([_round(1, _run(200.0, load_seconds=50.0), resident)]) == [True, True, False, True, True]
    assert _passes([_round(1, _run(180.0, load_seconds=60.0, loads=5), resident)]) == [True, True, True, False, True]
    lossy = {**resident, "lines_duplicated": 1}
    assert _passes([_round(1, good_budget, lossy)]) == [True, True, True, True, False]


def test_a_system_that_did_not_run_fails_the_run_and_leaves_its_goals_unmeasured():
    broken = _round(1, {"system": BUDGET, "error": "TimeoutError: batches not ended"}, _run(100.0))
    assert broken["ratios"] == {"makespan": None, "work": None}
    assert _passes([broken]) == [None, None, None, None, None]
    assert run_failed([broken]) and not run_failed([_round(1, _run(150.0), _run(100.0))])
    assert run_failed([_round(1, {**_run(150.0), "batches_not_completed": ["chat-1h"]}, _run(100.0))])


def test_w10_runs_through_the_one_harness_and_renders():
    assert isinstance(WORKLOADS["W10"], W10EnginesOnDemand)
    day, hour = round_plan(1.0)
    rounds = [_round(1, _run(180.0, load_seconds=60.0), _run(100.0))]
    doc = {
        "models": [CHAT, CHAT_B, EMBED],
        "budget_engines": 1,
        "min_residency_seconds": 30.0,
        "eager": True,
        "scale": 1.0,
        "plan": [{"batch": b.name, "model": b.model, "window": b.window, "lines": b.lines} for b in day + hour],
        "seconds": 700.0,
        "rounds": rounds,
        "summary": {BUDGET: {"makespan_s": 180.0, "loads": 3}, RESIDENT: {"makespan_s": 100.0, "loads": 0}},
        "checks": goal_checks(rounds),
    }
    text = render(doc)
    assert "| budget | 180 | - | - | 3 | - | - |" in text and "| resident | 100 | - | - | 0 | - | - |" in text
    assert "| 1 | budget then resident | 1.8 | 1.2 |" in text
    assert "0 s batchd-tiny-chat loaded" in text
    assert "| chat-1h | batchd-tiny-chat | 1h | 10 | 2 | 32 | 30 | completed | yes | 0 | 0 | 0 |" in text
    assert text.count("| pass |") == 5
