"""W10's work and servers: three models (the built-in tiny chat model under two names, each its
own engine, and MiniLM embeddings), the batches a round creates on each system, and the two
systems (one resident engine, or every engine resident)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

CHAT = "batchd-tiny-chat"
# The same built-in model served under a second name (`--model tiny-chat-b=batchd-tiny-chat`):
# an engine of its own, so three models share the budget.
CHAT_B = "tiny-chat-b"
EMBED = "all-MiniLM-L6-v2"
# In `batchd serve`'s order: the first is the engine loaded at start on the budget system.
MODELS = (CHAT, CHAT_B, EMBED)

BUDGET, RESIDENT = "budget", "resident"
SYSTEMS = (BUDGET, RESIDENT)
BUDGET_ENGINES = 1

CHAT_MAX_TOKENS = 12
WINDOW_SECONDS = {"1h": 3600.0, "24h": 86400.0}
# The 1h batches come this long after the last 24h batch was created.
SECOND_WAVE_DELAY_S = 2.0

# Lines at scale 1: about 75 s of engine time on 2 CPUs (MiniLM ~100 lines/s, the tiny chat
# model ~500 lines/s at 12 tokens), so one round (two servers, each starting three engines)
# takes about eight minutes.
DAY_LINES = {EMBED: 1500, CHAT: 5000, CHAT_B: 5000}  # each of two 24h batches per model
HOUR_LINES = {EMBED: 300, CHAT: 1000, CHAT_B: 1000}  # one 1h batch per model
DAY_BATCHES_PER_MODEL = 2
# The 1h batches in the order they are created: the last one's model ends up running its 24h
# batches too, the others' 24h batches wait for a second turn.
HOUR_ORDER = (CHAT, CHAT_B, EMBED)


@dataclass(frozen=True)
class Planned:
    name: str
    model: str
    window: str
    lines: int

    @property
    def endpoint(self) -> str:
        return "/v1/embeddings" if self.model == EMBED else "/v1/chat/completions"

    @property
    def deadline_s(self) -> float:
        return WINDOW_SECONDS[self.window]

    def custom_ids(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.lines)]


def _short(model: str) -> str:
    return {CHAT: "chat", CHAT_B: "chat-b", EMBED: "embed"}[model]


def round_plan(scale: float = 1.0) -> tuple[list[Planned], list[Planned]]:
    """The batches of one system's round, in the order they are created: the 24h wave (each
    model's two, embeddings first, the models alternating), then, SECOND_WAVE_DELAY_S later,
    the 1h wave (one per model)."""

    def size(n: int) -> int:
        return max(1, round(n * scale))

    day = [
        Planned(f"{_short(model)}-24h-{n}", model, "24h", size(DAY_LINES[model]))
        for n in range(1, DAY_BATCHES_PER_MODEL + 1)
        for model in (EMBED, CHAT, CHAT_B)
    ]
    hour = [Planned(f"{_short(model)}-1h", model, "1h", size(HOUR_LINES[model])) for model in HOUR_ORDER]
    return day, hour


def batch_lines(batch: Planned) -> bytes:
    """The batch's input file: short chat lines (max_tokens CHAT_MAX_TOKENS) or short sentences."""
    out = []
    for i, custom_id in enumerate(batch.custom_ids()):
        if batch.model == EMBED:
            body: dict = {"model": EMBED, "input": f"sentence {i} of {batch.name} to embed"}
        else:
            body = {
                "model": batch.model,
                "messages": [{"role": "user", "content": f"q{i} of {batch.name}"}],
                "max_tokens": CHAT_MAX_TOKENS,
            }
        out.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": batch.endpoint, "body": body}))
    return ("\n".join(out) + "\n").encode()


def serve_args(system: str, config: Path) -> list[str]:
    """`batchd serve`'s model flags for ``system``: the same three models on both, one resident
    engine on the budget system."""
    args = ["--model", CHAT, "--model", f"{CHAT_B}={CHAT}", "--model", EMBED, "--config", str(config)]
    return args + (["--max-resident-engines", str(BUDGET_ENGINES)] if system == BUDGET else [])


def write_config(path: Path, eager: bool) -> Path:
    """The models' config file: every engine eager (no torch.compile) when ``eager``."""
    models = {model: {"engine_args": {"enforce_eager": True}} for model in MODELS} if eager else {}
    path.write_text(json.dumps({"models": models}))
    return path
