"""The one bench harness: its report writer (JSON with the commit, Markdown, chart), its process
runner (markers, memory, the child's group ended, the timeout), its command line, and one
workload run end to end at a tiny scale (W8-layers: a fake fleet, no engine, seconds)."""

from __future__ import annotations

import json
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from bench import provenance
from bench.__main__ import parse_args
from bench.proc import run_logged
from bench.report import Document, Report, plt, read_document, write_report
from bench.workloads import DEFAULT, WORKLOADS
from bench.workloads.w8_frontend import Run, summary

ROOT = Path(__file__).parents[2]
MACHINE = {"cpus": 2, "memory_gib": 1.0, "load_average": [0.5, 0.4, 0.3], "batchd_commit": "abc1234+dirty"}


def _render(doc: Document) -> str:
    return f"| figure |\n|---|\n| {doc['figure']} |"


def _chart(doc: Document, path: Path) -> None:
    pyplot = plt()
    fig, ax = pyplot.subplots()
    ax.bar([0], [doc["figure"]])
    fig.savefig(path)
    pyplot.close(fig)


def test_the_writer_puts_the_commit_and_command_in_the_json_and_draws_markdown_and_chart_from_it(tmp_path):
    report = Report("W0", "W0-test", "A test workload", {"figure": 42}, _render, _chart)
    files = write_report(report, tmp_path, machine=MACHINE, command="python -m bench --workloads W0", label="-x")

    assert sorted(files) == [".json", ".md", ".png"]
    assert files[".json"].name.endswith("-W0-test-x.json")
    doc = json.loads(files[".json"].read_text())
    assert doc["workload"] == {"id": "W0", "slug": "W0-test", "title": "A test workload"}
    assert doc["command"] == "python -m bench --workloads W0" and doc["figure"] == 42
    assert doc["machine"]["batchd_commit"] == "abc1234+dirty" and len(doc["machine"]["load_average_after"]) == 3
    assert provenance.measured_commit(doc) == "abc1234"
    lines = files[".md"].read_text().splitlines()
    assert lines[0] == f"# W0 — A test workload ({doc['date']})"
    assert lines[2].startswith("batchd commit measured: `abc1234+dirty`.")
    assert f"![A test workload]({files['.png'].name})" in lines and "| 42 |" in lines
    assert files[".png"].read_bytes().startswith(b"\x89PNG")


def test_a_report_without_a_chart_still_keeps_its_json(tmp_path):
    files = write_report(Report("W0", "W0-test", "t", {"figure": 1}, _render), tmp_path, machine=MACHINE, command="c")
    assert sorted(files) == [".json", ".md"]
    assert json.loads(files[".json"].read_text())["figure"] == 1


def test_raw_samples_go_compressed_beside_the_json_and_render_still_sees_them(tmp_path):
    samples = {"timeline": [[0.1 * t, 12.5] for t in range(1000)]}

    def render(doc: Document) -> str:
        return f"{len(doc['timeline'])} samples"

    report = Report("W0", "W0-test", "t", {"figure": 1}, render, samples=samples)
    files = write_report(report, tmp_path, machine=MACHINE, command="c")

    assert sorted(files) == [".json", ".md", ".samples.json.gz"]
    doc = json.loads(files[".json"].read_text())
    assert "timeline" not in doc and doc["samples_file"] == files[".samples.json.gz"].name
    assert files[".samples.json.gz"].read_bytes().startswith(b"\x1f\x8b")  # gzip
    assert read_document(files[".json"])["timeline"] == samples["timeline"]
    assert "1000 samples" in files[".md"].read_text()


def test_a_workloads_data_cannot_overwrite_the_reports_head(tmp_path):
    report = Report("W0", "W0-test", "t", {"machine": {}}, _render)
    with pytest.raises(ValueError, match="machine"):
        write_report(report, tmp_path, machine=MACHINE, command="c")
    assert list(tmp_path.iterdir()) == []


CHILD = textwrap.dedent(
    """
    import json, subprocess, sys, time
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print("helper", helper.pid, flush=True)
    time.sleep(0.3)
    block = bytearray(80 * 1024 * 1024)
    print("ready", flush=True)
    time.sleep(0.5)
    print(json.dumps({"lines": 3}), flush=True)
    """
)


def test_the_runner_times_markers_samples_memory_and_ends_the_childs_whole_group(tmp_path):
    done = run_logged(
        [sys.executable, "-c", CHILD], tmp_path / "child.log", markers={"ready": "^ready$", "helper": r"^helper (\d+)"}
    )

    assert done.returncode == 0, done.failure()
    assert done.spawned < done.markers["helper"] < done.markers["ready"] < done.exited
    assert done.last_json() == {"lines": 3}
    assert done.rss.peak_total >= 80 * 1024 * 1024
    assert done.rss.peak_between(done.markers["ready"], done.exited) >= 80 * 1024 * 1024
    assert "ready\n" in (tmp_path / "child.log").read_text()
    helper = int(done.matches["helper"].group(1))
    # The helper it left running went with its group.
    assert not psutil.pid_exists(helper) or psutil.Process(helper).status() == psutil.STATUS_ZOMBIE


def test_the_runner_kills_a_child_at_its_timeout(tmp_path):
    started = time.monotonic()
    done = run_logged([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "slow.log", timeout=0.5)
    assert done.returncode == -9
    assert time.monotonic() - started < 30


def test_the_command_line_keeps_one_workload_and_one_round_and_routes_each_param_to_its_workload():
    args = parse_args(["--workloads", "W1", "--rounds", "1"])
    assert args.workloads == ["W1"] and args.rounds == 1 and args.params == {"W1": {}}
    assert parse_args([]).workloads == list(DEFAULT) == ["W1", "W2", "W3", "W4"]
    assert parse_args(["--workloads", "all"]).workloads == list(WORKLOADS)
    args = parse_args(["--workloads", "W5,W8", "--param", "kinds=chat", "--param", "scenarios=one"])
    assert args.params == {"W5": {"scenarios": "one"}, "W8": {"kinds": "chat"}}


@pytest.mark.parametrize(
    "argv",
    [
        ["--workloads", "W1", "--param", "kinds=chat"],  # no workload asked for takes it
        ["--workloads", "W8", "--param", "profile=maybe"],  # not a bool
        ["--workloads", "W5", "--rounds", "3"],  # W5 runs once
        ["--workloads", "W99"],  # no such workload
    ],
)
def test_the_command_line_refuses_what_no_workload_takes(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_every_workload_has_its_own_report_name_and_default_params():
    assert len({w.slug for w in WORKLOADS.values()}) == len(WORKLOADS)
    for workload in WORKLOADS.values():
        workload.Params()  # the reported runs' settings are the defaults


def test_w8_ratios_to_the_bare_client_are_medians_of_same_round_ratios():
    def run(system: str, round_: int, wall_s: float) -> Run:
        return Run(system, "chat", round_, 100, 100, wall_s, wall_s, 0.1, 100)

    # batchd 50, 100, 20 lines/s; bare 100, 100, 25: same-round 0.5, 1.0, 0.8 -> 0.8 (medians: 50/100 = 0.5).
    runs = [run("batchd", r, t) for r, t in ((1, 2.0), (2, 1.0), (3, 5.0))]
    runs += [run("bare", r, t) for r, t in ((1, 1.0), (2, 1.0), (3, 4.0))]
    chat = summary(runs, ["chat"])["chat"]
    assert chat["round_ratios"] == [0.5, 1.0, 0.8]
    assert chat["ratio_lines_per_s"] == pytest.approx(0.8)


def test_a_workload_runs_through_the_harness_and_its_report_keeps_its_json(tmp_path):
    """W8-layers at 100 requests, two rounds: the fake fleet and the layers in one process."""
    results = tmp_path / "results"
    cmd = [sys.executable, "-m", "bench", "--workloads", "W8-layers", "--scale", "0.005", "--rounds", "2"]
    done = run_logged([*cmd, "--results-dir", str(results), "--work-dir", str(tmp_path / "work")], tmp_path / "log")
    assert done.returncode == 0, done.failure()
    (report,) = results.glob("*-W8-layers.json")
    doc = json.loads(report.read_text())
    assert doc["requests"] == 100 and doc["rounds"] == 2
    assert sorted((r["round"], r["layer"]) for r in doc["runs"]) == sorted(
        (r, layer) for r in (1, 2) for layer in ("aiohttp", "aiohttp+timeout", "send", "registry", "executor")
    )
    assert doc["median_ratio_to_aiohttp"]["aiohttp"] == 1.0
    assert doc["machine"]["batchd_commit"]
    assert report.with_suffix(".md").read_text().startswith("# W8-layers — ")
