"""W6-lanes' pure logic: percentiles, the same-round throughput ratios, the goals and the report."""

from __future__ import annotations

from bench.workloads import WORKLOADS
from bench.workloads.w6.lanes import lane_checks, latency_summary, percentile, throughput_ratios
from bench.workloads.w6.lanes_workload import W6Lanes, render


def test_percentiles_are_nearest_rank():
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 50) == 10.0 and percentile(values, 95) == 19.0 and percentile(values, 100) == 20.0
    assert percentile([3.0], 95) == 3.0 and percentile([], 50) is None
    assert latency_summary([2.0, 1.0, 4.0]) == {"requests": 3, "p50_s": 2.0, "p95_s": 4.0, "max_s": 4.0}


def test_ratios_pair_the_windows_of_each_round_whatever_their_order():
    windows = [
        {"round": 1, "kind": "alone", "lines_per_second": 200.0},
        {"round": 1, "kind": "beside", "lines_per_second": 190.0},
        {"round": 2, "kind": "beside", "lines_per_second": 150.0},
        {"round": 2, "kind": "alone", "lines_per_second": 200.0},
    ]
    assert throughput_ratios(windows) == [0.95, 0.75]


def test_the_goals_fail_on_slow_requests_a_costly_lane_or_a_request_that_did_not_complete():
    fast, slow = [0.5, 0.8, 1.2], [0.5, 6.0]
    passing = lane_checks(fast, fast, [0.95, 1.0, 0.97], failures=0)
    assert [c["pass"] for c in passing] == [True, True, True, True]
    assert passing[2]["value"] == "0.97x (0.95, 1.00, 0.97)"
    failing = lane_checks(slow, [], [0.5], failures=1)
    assert [c["pass"] for c in failing] == [False, None, False, False]


def test_w6_lanes_runs_through_the_one_harness_and_renders():
    assert isinstance(WORKLOADS["W6-lanes"], W6Lanes)
    doc = {
        "startup_seconds": 40.0,
        "window_seconds": 30.0,
        "batch_lines": 50_000,
        "batches": 4,
        "windows": [{"round": 1, "kind": "alone", "lines_per_second": 200.0}],
        "ratios": [0.97],
        "background": latency_summary([1.0, 2.0]),
        "flex": latency_summary([0.5]),
        "failures": [],
        "checks": lane_checks([1.0, 2.0], [0.5], [0.97], 0),
    }
    text = render(doc)
    assert "| background response | 2 | 1.0 | 2.0 | 2.0 |" in text
    assert "| flex chat call | 1 | 0.5 | 0.5 | 0.5 |" in text and "| 1 | alone | 200.0 |" in text
