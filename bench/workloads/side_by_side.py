"""W1–W4, the side-by-side workloads: batchd against vLLM (the limit and the peer) on the same
generated input and machine; what each measures, its engine settings, and its generated inputs.

``prepare`` writes a workload's input files (one per size, plus a small warm-up file with
other content) into a directory, deterministically from the seed; ``scale`` multiplies the
line counts for smoke runs. The systems compared are bench/systems/; the rounds are run by
bench/workloads/side_by_side_run.py, reported by side_by_side_report.py, and registered as
workloads by side_by_side_workloads.py.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from bench import inputs
from bench.engine import EngineSettings
from bench.models import Models
from bench.workload import NoParams

# Chat and Q&A engine: the tiny model has 2 layers x 1 KV head x head_dim 64, so one token of
# KV cache is 2 x 1 x 64 x 2 (K, V) x 4 bytes (float32) = 1 KiB.
CHAT_MAX_NUM_SEQS = 128
MAX_NUM_BATCHED_TOKENS = 4096
DOC_TOKENS = 1000


@dataclass(frozen=True)
class SideBySide:
    """A side-by-side workload's definition: ``sizes`` are the base line counts, one measured run
    each, on every system (--systems), in fresh processes (side_by_side_workloads runs it)."""

    id: str
    slug: str
    title: str
    description: str
    sizes: tuple[int, ...]
    default_rounds: int = 1
    Params: ClassVar[type[NoParams]] = NoParams

    @property
    def is_chat(self) -> bool:
        return self.id in ("W1", "W3")


SIDE_BY_SIDE_SPECS: dict[str, SideBySide] = {
    w.id: w
    for w in (
        SideBySide(
            "W1",
            "W1-chat",
            "Chat throughput",
            "batchd-tiny-chat, short distinct prompts, 64 output tokens each "
            "(max_tokens 64, ignore_eos, temperature 0).",
            (4_000,),
        ),
        SideBySide(
            "W2",
            "W2-embeddings",
            "Embeddings throughput",
            "all-MiniLM-L6-v2, one or two sentences per line.",
            (20_000,),
        ),
        SideBySide(
            "W3",
            "W3-doc-qa",
            "Document Q&A with prefix caching",
            f"batchd-tiny-chat, {inputs.QUESTIONS_PER_DOCUMENT} questions about each of 200 distinct "
            f"~{DOC_TOKENS}-token documents (document first, question last), shuffled; prefix caching "
            "on; 64k tokens of KV cache, too small to hold every document at once; 16 output tokens.",
            (4_000,),
        ),
        SideBySide(
            "W4",
            "W4-memory",
            "Peak memory vs batch size",
            "all-MiniLM-L6-v2 embeddings, 5,000 vs 50,000 lines; each size in fresh processes.",
            (5_000, 50_000),
        ),
    )
}


@dataclass(frozen=True)
class PreparedRun:
    """One measured input of a workload."""

    label: str
    lines: int
    input_path: Path


@dataclass(frozen=True)
class PreparedWorkload:
    workload: SideBySide
    engine: EngineSettings
    endpoint: str
    runs: tuple[PreparedRun, ...]
    warmup_path: Path


def engine_settings(workload: SideBySide, models: Models) -> EngineSettings:
    """The engine every system uses for ``workload``."""
    if workload.id == "W1":
        return EngineSettings(
            models.chat_name,
            str(models.chat_path),
            "generate",
            max_model_len=2048,
            kv_cache_gib=0.25,
            max_num_seqs=CHAT_MAX_NUM_SEQS,
            max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
            enable_prefix_caching=True,
        )
    if workload.id == "W3":
        return EngineSettings(
            models.chat_name,
            str(models.chat_path),
            "generate",
            max_model_len=2048,
            kv_cache_gib=0.0625,
            max_num_seqs=CHAT_MAX_NUM_SEQS,
            max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
            enable_prefix_caching=True,
        )
    return EngineSettings(
        models.embed_name,
        str(models.embed_path),
        "pooling",
        max_model_len=256,
        kv_cache_gib=0.25,
        max_num_seqs=CHAT_MAX_NUM_SEQS,
        max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
        enable_prefix_caching=False,
    )


def prepare(workload: SideBySide, models: Models, directory: Path, *, scale: float, seed: int) -> PreparedWorkload:
    """Write the workload's inputs into ``directory`` and describe its runs."""
    directory.mkdir(parents=True, exist_ok=True)
    engine = engine_settings(workload, models)
    runs = []
    for size in workload.sizes:
        rng = random.Random(f"{seed}-{workload.id}-{size}")
        path = directory / f"input-{size}.jsonl"
        count = inputs.write_jsonl(path, _lines(workload, models, max(1, round(size * scale)), rng, "line"))
        runs.append(PreparedRun(f"{count:,} lines", count, path))
    warmup = directory / "warmup.jsonl"
    rng = random.Random(f"{seed}-{workload.id}-warmup")
    inputs.write_jsonl(warmup, _lines(workload, models, inputs.QUESTIONS_PER_DOCUMENT, rng, "warmup"))
    endpoint = inputs.CHAT_URL if workload.is_chat else inputs.EMBEDDINGS_URL
    return PreparedWorkload(workload, engine, endpoint, tuple(runs), warmup)


def _lines(workload: SideBySide, models: Models, n: int, rng: random.Random, prefix: str) -> Iterable[dict]:
    if workload.id == "W1":
        return inputs.chat_lines(n, rng, models.chat_name, max_tokens=64, prefix=prefix)
    if workload.id == "W3":
        n_docs = max(1, round(n / inputs.QUESTIONS_PER_DOCUMENT))
        docs = inputs.documents(n_docs, rng, models.chat_tokenizer, DOC_TOKENS)
        return inputs.doc_qa_lines(docs, rng, models.chat_name, max_tokens=16, prefix=prefix)
    return inputs.embedding_lines(n, rng, models.embed_name, prefix=prefix)
