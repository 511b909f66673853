"""The vLLM engine flags `batchd run-batch` takes: the `vllm serve` / `vllm run-batch` flags its
users pass most, checked here (types, choices) so a bad value is refused before vLLM is even
imported, and `--engine-arg KEY=VALUE` for any other engine option. Anything else is an unknown
flag, refused, never handed to vLLM to interpret."""

from __future__ import annotations

import argparse
import re
from typing import Any

import yaml

DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")
# ModelSpec's own fields (app/engine/config/specs.py); every other flag is an engine_args entry.
SPEC_FIELDS = ("dtype", "max_model_len", "gpu_memory_utilization")
_TOKENS = re.compile(r"(\d+)([kK]?)")


def token_count(value: str) -> int:
    """A whole number of tokens, as vLLM reads it: `4096`, `32k` (32,000) or `32K` (32,768)."""
    match = _TOKENS.fullmatch(value.strip())
    if match is None or int(match.group(1)) < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number such as 4096, 32k or 32K, got {value!r}")
    number, suffix = match.groups()
    return int(number) * {"": 1, "k": 1000, "K": 1024}[suffix]


def positive_int(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {value!r}")
    return int(value)


def memory_share(value: str) -> float:
    try:
        share = float(value)
    except ValueError:
        share = -1.0
    if not 0 < share <= 1:
        raise argparse.ArgumentTypeError(f"expected a share of memory above 0 and at most 1, got {value!r}")
    return share


def engine_arg(value: str) -> tuple[str, Any]:
    """`KEY=VALUE`: KEY as `vllm serve` spells it (dashes or underscores), VALUE a YAML scalar or
    flow mapping/list (`true`, `8`, `0.5`, `{"image": 2}`)."""
    key, sep, raw = value.partition("=")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", key.lstrip("-")):
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. enable-log-requests=true), got {value!r}")
    try:
        parsed = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError:
        parsed = raw
    return key.lstrip("-").replace("-", "_"), parsed


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "vLLM engine options",
        "as `vllm serve` takes them; any other engine option goes as --engine-arg KEY=VALUE "
        "(the model config file's engine_args)",
    )
    actions: list[argparse.Action] = []

    def add(*flags: str, **kwargs: Any) -> None:
        actions.append(group.add_argument(*flags, **kwargs))

    add("--dtype", choices=DTYPES, help="weights and activations type (default float32 on CPU)")
    add("--max-model-len", type=token_count, metavar="TOKENS", help="context length, e.g. 4096 or 32k")
    add("--max-num-seqs", type=positive_int, metavar="N", help="sequences per engine step")
    add("--max-num-batched-tokens", type=token_count, metavar="TOKENS", help="tokens per engine step")
    add("--gpu-memory-utilization", type=memory_share, metavar="SHARE", help="share of device memory, e.g. 0.9")
    add("-tp", "--tensor-parallel-size", type=positive_int, metavar="N", help="GPUs per model")
    add("-pp", "--pipeline-parallel-size", type=positive_int, metavar="N", help="pipeline stages")
    for flag in ("--enable-prefix-caching", "--enable-chunked-prefill"):
        add(flag, action=argparse.BooleanOptionalAction, default=None)
    add("--enforce-eager", action="store_true", default=None, help="no CUDA graphs / compilation")
    add("--trust-remote-code", action="store_true", default=None, help="run the model repo's code")
    for flag, meta in (
        ("--quantization", "METHOD"),
        ("--kv-cache-dtype", "DTYPE"),
        ("--tokenizer", "PATH"),
        ("--revision", "REV"),
        ("--download-dir", "DIR"),
        ("--load-format", "FORMAT"),
        ("--chat-template", "FILE"),
        ("--response-role", "ROLE"),
    ):
        add(flag, metavar=meta)
    add("--seed", type=int)
    add("--max-logprobs", type=int, metavar="N")
    group.add_argument(
        "--engine-arg",
        dest="engine_arg",
        action="append",
        type=engine_arg,
        default=[],
        metavar="KEY=VALUE",
        help="any other vLLM engine option, repeatable (e.g. --engine-arg enable-log-requests=true)",
    )
    parser.set_defaults(engine_flags=tuple(action.dest for action in actions))


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    """The flags given, as model config options (ModelSpec fields and an `engine_args` mapping)."""
    given = {key: value for key in args.engine_flags if (value := getattr(args, key)) is not None}
    options: dict[str, Any] = {key: given.pop(key) for key in SPEC_FIELDS if key in given}
    engine_args = {**given, **dict(args.engine_arg)}
    if engine_args:
        options["engine_args"] = engine_args
    return options
