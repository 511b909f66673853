"""The `batchd` command itself (its subcommands are tested where they act: tests/domains, tests/e2e), and
`batchd run-batch` refusing what cannot work before it loads a model (no engine starts here)."""

from __future__ import annotations

import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from app import cli
from app.runbatch.engine_flags import engine_options

ROOT = Path(__file__).resolve().parents[1]
BATCHD = Path(sys.executable).parent / "batchd"


def test_version_is_the_package_version():
    """`batchd --version` prints the installed package's version (pyproject.toml's), and needs no
    subcommand."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = subprocess.run([str(BATCHD), "--version"], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"batchd {version}\n", "")


# `batchd run-batch` refusing before any model loads: run through cli.main in a fresh interpreter
# that exits 99 if vLLM was imported by then.
_NO_VLLM = """
import sys
from app.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
sys.exit(99 if "vllm" in sys.modules else code)
"""


def _refused_run_batch(tmp_path: Path, *args: str) -> str:
    """Run `batchd run-batch ARGS`; check the refusal (exit 2, one line, quick, no vLLM, no
    file written) and return its line."""
    source = tmp_path / "in.jsonl"
    source.write_text('{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n')
    (tmp_path / "a-file").write_text("")
    before = sorted(tmp_path.rglob("*"))
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", _NO_VLLM, "run-batch", "--model", "batchd-tiny-chat", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert time.monotonic() - started < 10
    assert (done.returncode, done.stdout) == (2, ""), done
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("batchd"), done.stderr
    assert sorted(tmp_path.rglob("*")) == before  # no .partial, no output, no data dir
    return done.stderr.strip()


def test_run_batch_refuses_a_missing_input_before_loading_a_model(tmp_path):
    line = _refused_run_batch(tmp_path, "-i", "missing.jsonl", "-o", "out.jsonl")
    assert line == "batchd run-batch: error: cannot read -i missing.jsonl: no such file or directory"


@pytest.mark.parametrize(
    ("output", "reason"),
    [("a-file/out.jsonl", "not a directory"), (".", ". is a directory")],
)
def test_run_batch_refuses_an_output_it_cannot_write(tmp_path, output, reason):
    line = _refused_run_batch(tmp_path, "-i", "in.jsonl", "-o", output)
    assert line == f"batchd run-batch: error: cannot write -o {output}: {reason}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-model-len", "lots"], "argument --max-model-len: expected a positive whole number"),
        (["--dtype", "fp99"], "argument --dtype: invalid choice: 'fp99'"),
        (["--gpu-memory-utilization", "1.5"], "argument --gpu-memory-utilization: expected a share of memory"),
        (["--engine-arg", "enforce-eager"], "argument --engine-arg: expected KEY=VALUE"),
        (["--resume", "-o", "-"], "--resume needs an output file or URL, not stdout"),
        (["--config", "missing.yaml"], "Cannot read model config missing.yaml"),
    ],
)
def test_run_batch_refuses_a_bad_option_before_loading_a_model(tmp_path, args, message):
    line = _refused_run_batch(tmp_path, "-i", "in.jsonl", "-o", "out.jsonl", *args)
    assert line.startswith("batchd run-batch: error: ") and message in line


@pytest.mark.parametrize("flag", ["--max-modle-len", "--max-model", "--gpu-memory-utilisation"])
def test_run_batch_refuses_an_unknown_flag_instead_of_passing_it_to_vllm(tmp_path, flag):
    """A mistyped flag, and an abbreviation of a known one, are refused, never handed to vLLM."""
    line = _refused_run_batch(tmp_path, "-i", "in.jsonl", "-o", "out.jsonl", flag, "4096")
    assert line.startswith(f"batchd: error: unrecognized arguments: {flag} 4096 (see `batchd run-batch --help`")


def test_run_batch_passes_the_engine_flags_vllm_run_batch_users_give():
    """The common `vllm run-batch` command lines parse as they do there; the engine flags become
    the model config file's options (ModelSpec fields, engine_args), --engine-arg any other."""
    args = cli.build_parser().parse_args(
        [
            *("run-batch", "-i", "in.jsonl", "-o", "out.jsonl", "--model", "meta-llama/Meta-Llama-3-8B-Instruct"),
            *("--served-model-name", "llama", "llama-3", "--output-tmp-dir", "/tmp/stage"),
            *("--dtype", "bfloat16", "--max-model-len", "32k", "--gpu-memory-utilization", "0.9", "-tp", "2"),
            *("--enable-prefix-caching", "--no-enable-chunked-prefill", "--max-num-seqs", "64", "--enforce-eager"),
            *("--engine-arg", "enable-log-requests=true", "--engine-arg", 'limit_mm_per_prompt={"image": 2}'),
        ]
    )
    assert (args.served_model_name, args.output_tmp_dir) == (["llama", "llama-3"], "/tmp/stage")
    assert engine_options(args) == {
        "dtype": "bfloat16",
        "max_model_len": 32000,
        "gpu_memory_utilization": 0.9,
        "engine_args": {
            "tensor_parallel_size": 2,
            "enable_prefix_caching": True,
            "enable_chunked_prefill": False,
            "max_num_seqs": 64,
            "enforce_eager": True,
            "enable_log_requests": True,
            "limit_mm_per_prompt": {"image": 2},
        },
    }
    bare = cli.build_parser().parse_args(["run-batch", "-i", "-", "-o", "-", "--model", "m"])
    assert engine_options(bare) == {}


def test_serve_takes_an_engine_memory_budget_as_a_size_or_auto_from_the_flag_or_the_environment(monkeypatch):
    def budget(*argv: str):
        return cli._settings(cli.build_parser().parse_args(["serve", *argv])).engine_memory_budget

    monkeypatch.delenv("BATCHD_ENGINE_MEMORY_BUDGET", raising=False)
    assert budget() is None  # unset: only --max-resident-engines limits, as before
    assert budget("--engine-memory-budget", "8GiB") == 8 << 30
    assert budget("--engine-memory-budget", "500MB") == 500_000_000
    assert budget("--engine-memory-budget", "auto") == "auto"
    monkeypatch.setenv("BATCHD_ENGINE_MEMORY_BUDGET", "1.5GiB")
    assert budget() == 3 << 29
    assert budget("--engine-memory-budget", "AUTO") == "auto"  # the flag over the variable
    with pytest.raises(SystemExit, match="BATCHD_ENGINE_MEMORY_BUDGET: invalid size '8 gigs'"):
        budget("--engine-memory-budget", "8 gigs")
