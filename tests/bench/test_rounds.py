"""Repeated rounds: each system's reported run is its median round, a failed round is never
hidden, and the running order rotates between rounds."""

from __future__ import annotations

from bench import compare
from bench.result import SystemRun, median_run
from bench.workload import rotated
from bench.workloads.side_by_side_report import markdown


def _run(processing_s: float | None, error: str | None = None) -> SystemRun:
    return SystemRun("runbatch", 100, ok=100, processing_s=processing_s, error=error)


def test_median_round_is_reported_with_every_rounds_throughput():
    chosen = median_run([_run(2.0), _run(1.0), _run(4.0)])
    assert chosen.processing_s == 2.0
    assert chosen.round_lines_per_s == [50.0, 100.0, 25.0]


def test_even_rounds_report_the_lower_median():
    assert median_run([_run(1.0), _run(2.0), _run(4.0), _run(5.0)]).processing_s == 4.0


def test_a_failed_round_is_the_result():
    chosen = median_run([_run(1.0), _run(None, error="engine died"), _run(2.0)])
    assert chosen.error == "engine died"


def test_single_round_carries_no_round_list():
    assert median_run([_run(1.0)]).round_lines_per_s == []


def test_order_rotates_each_round():
    names = ["limit", "peer", "runbatch", "server"]
    assert [rotated(names, r)[0] for r in range(5)] == ["limit", "peer", "runbatch", "server", "limit"]
    assert sorted(rotated(names, 3)) == sorted(names)
    assert [rotated(("batchd", "bare"), r) for r in range(2)] == [["batchd", "bare"], ["bare", "batchd"]]


def _report(systems: dict) -> dict:
    return {
        "workload": {"id": "W1", "slug": "W1-chat", "title": "t", "description": "d"},
        "date": "2026-11-23",
        "scale": 1,
        "seed": 0,
        "rounds": 3,
        "machine": {
            "cpus": 2,
            "memory_gib": 1,
            "load_average": [0.0],
            "vllm": "v",
            "torch": "t",
            "python": "p",
            "batchd_commit": "c",
        },
        "engine": {
            "served_name": "m",
            "runner": "generate",
            "dtype": "float32",
            "max_model_len": 1,
            "kv_cache_gib": 1,
            "kv_cache_bytes": 1,
            "max_num_seqs": 1,
            "max_num_batched_tokens": 1,
            "enable_prefix_caching": True,
        },
        "systems": {name: {"description": "d", "timing": "t"} for name in systems},
        "runs": [
            {
                "label": "100 lines",
                "lines": 100,
                "systems": {
                    name: {
                        **run.to_dict(),
                        "ratios": {
                            "lines_per_s_vs_limit": None,
                            "lines_per_s_vs_peer": None,
                            "peak_rss_vs_limit": None,
                            "peak_rss_vs_peer": None,
                        },
                    }
                    for name, run in systems.items()
                },
            }
        ],
        "checks": [],
    }


def test_markdown_lists_the_rounds():
    text = markdown(_report({"runbatch": median_run([_run(2.0), _run(1.0), _run(4.0)])}))
    assert "3 rounds" in text and "each row is the system's median round" in text
    assert "- runbatch: lines/s by round 50.0, 100.0, 25.0 (the median round is shown)." in text


def test_markdown_gives_each_rounds_ratio_to_the_limit_of_the_same_round():
    limit = median_run([SystemRun("limit", 100, ok=100, processing_s=t) for t in (1.0, 2.0, 4.0)])
    text = markdown(_report({"limit": limit, "runbatch": median_run([_run(2.0), _run(1.0), _run(4.0)])}))
    assert (
        "- runbatch: lines/s by round 50.0, 100.0, 25.0 (the median round is shown). "
        "Same-round ratios: × limit 0.50×, 2.00×, 1.00×." in text
    )
    assert "- limit: lines/s by round 100.0, 50.0, 25.0 (the median round is shown).\n" in text


def _cpu_run(system: str, processing_s: float, main_cpu_s: float) -> SystemRun:
    return SystemRun(system, 100, ok=100, processing_s=processing_s, rss={"main_cpu_processing_s": main_cpu_s})


def test_ratios_are_medians_of_same_round_ratios_not_ratios_of_medians():
    limit = median_run([_cpu_run("limit", t, 0.1) for t in (1.0, 2.0, 4.0)])  # 100, 50, 25 lines/s
    peer = median_run([_cpu_run("peer", t, 0.2) for t in (4.0, 1.0, 8.0)])  # 25, 100, 12.5
    server = median_run([_cpu_run("server", t, c) for t, c in ((2.0, 0.1), (1.0, 0.1), (5.0, 0.3))])  # 50, 100, 20
    ratios = compare.throughput_ratios({"limit": limit, "peer": peer, "server": server})["server"]
    # Same-round ratios 0.5, 2, 0.8 -> 0.8 (the medians alone, 50 over 50, would say 1.0).
    assert ratios["lines_per_s_vs_limit"] == 0.8
    # 2, 1, 1.6 -> 1.6 (the medians, 50 over 25, would say 2.0).
    assert ratios["lines_per_s_vs_peer"] == 1.6
    # Main-process CPU: 1, 1, 3 ms a line against the peer's 2, 2, 2 -> 0.5.
    assert ratios["main_cpu_vs_peer"] == 0.5


def test_in_process_targets_include_the_main_process_cpu_and_every_input_size():
    def systems(lines: int) -> dict[str, SystemRun]:
        return {
            name: SystemRun(name, lines, ok=lines, processing_s=1.0, rss={"main_cpu_processing_s": cpu * lines})
            for name, cpu in (("limit", 0.001), ("peer", 0.002), ("runbatch", 0.001), ("server", 0.002))
        }

    found = compare.targets("W1", [systems(100), systems(1000)])
    checks = {t.check: t.passed for t in found}
    assert checks["runbatch: main-process CPU per line vs peer (100 lines)"] is True
    assert checks["server: main-process CPU per line vs peer (1,000 lines)"] is False
    assert checks["server: lines/s vs limit (1,000 lines)"] is True
    assert len(found) == 2 * 2 * 3
