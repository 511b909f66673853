"""Chargeback by API key with the official client's admin resources: usage per key (completions,
embeddings, audio transcriptions) and costs at the model config's prices, both equal to what the
batches' output files report, on SQLite and on Postgres, where the batches run across two
replicas (apps in this process) sharing the database and the bucket (shards of two lines, so a batch's lines are split
between them, and each replica's usage rows add up). Upstream models on the fake fleet
(chat: 5 prompt tokens, 3 of them cached with a prompt_cache_key, 2 output tokens; embeddings:
3 tokens an input; a transcription: 4 seconds)."""

from __future__ import annotations

import base64
import io
import json
import time
import wave
from collections import Counter, defaultdict
from decimal import Decimal

import openai
import pytest

from harness.fake_fleet import FakeFleet
from tests.conftest import API_KEYS_ENV
from tests.support import cli, db
from tests.support.app_server import AppServer
from tests.support.batches import create, results_by_custom_id, wait_for
from tests.support.keys import create_key

PRICES = {
    "chat-a": {"input": 2.5, "cached_input": 1.25, "output": 10, "batch_discount": 0.5},
    "embed": {"input": 0.13, "batch_discount": 0.25},
    "asr": {"audio_minute": 0.006},
}
DAY = 86400


def _config(path, fleet: FakeFleet):
    upstream = {"urls": fleet.urls, "model": fleet.model}
    models = {
        "chat-a": {"upstream": upstream, "pricing": PRICES["chat-a"]},
        "embed": {"upstream": upstream, "pricing": PRICES["embed"]},
        "asr": {"upstream": {**upstream, "endpoints": ["/v1/audio/transcriptions"]}, "pricing": PRICES["asr"]},
        # Priced but not served: a price alone starts nothing.
        "unserved": {"pricing": {"input": 1}},
    }
    path.write_text(json.dumps({"models": models}))
    return path


def _stored_key_ids(server) -> list[str]:
    """The public ids of the stored keys, in creation order (`batchd keys list`: id first)."""
    out = cli.on(server, "keys", "list").stdout
    return [f"key_{line.split()[0]}" for line in out.splitlines() if line.strip()]


def _wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(b"\0\0" * 16000)
    return "data:audio/wav;base64," + base64.b64encode(buffer.getvalue()).decode()


def _chat(n: int, prefix: str, cached_every: int = 0) -> list[dict]:
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": "chat-a",
                "messages": [{"role": "user", "content": "hi"}],
                **({"prompt_cache_key": "k"} if cached_every and i % cached_every == 0 else {}),
            },
        }
        for i in range(n)
    ]


def _embed(n: int, prefix: str) -> list[dict]:
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/embeddings",
            "body": {"model": "embed", "input": ["a"] * (1 + i % 3)},
        }
        for i in range(n)
    ]


def _audio(n: int, prefix: str) -> list[dict]:
    url = _wav()
    return [
        {
            "custom_id": f"{prefix}-{i}",
            "method": "POST",
            "url": "/v1/audio/transcriptions",
            "body": {"model": "asr", "file_url": url},
        }
        for i in range(n)
    ]


class Chargeback:
    """One server (two replicas on Postgres), three keys (a config key of proj-a, two stored keys
    of proj-s) and the usage their batches' output files report, by (api key, kind, model)."""

    def __init__(self, start_app, tmp_path_factory) -> None:
        tmp = tmp_path_factory.mktemp("chargeback")
        self.fleet = FakeFleet(tmp).start()
        env = {"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_SHARD_LINES": "2"}
        env["BATCHD_MODEL_CONFIG_FILE"] = str(_config(tmp / "m.json", self.fleet))
        self.server = start_app({**env, "BATCHD_REPLICA_ID": "replica-a"}, models=True)
        self.replicas = [self.server]
        if self.server.database_url:  # the same data dir (the keys' secret) and bucket
            second = AppServer(
                self.server.data_dir,
                self.server.database_url,
                env={**env, "BATCHD_REPLICA_ID": "replica-b"},
                models=True,
                s3=self.server.s3,
            )
            self.replicas.append(second.start())
        stored = [create_key(self.server, "proj-s"), create_key(self.server, "proj-s")]
        self.admin = self.server.client("unused", admin_api_key=create_key(self.server, "ops", "--admin"))
        self.s1_id, self.s2_id, _ = _stored_key_ids(self.server)

        def on(n: int, key: str) -> openai.OpenAI:
            """The key's client of the n-th batch's replica (they take turns)."""
            return self.replicas[n % len(self.replicas)].client(key)

        key_a, s1, s2 = "key-a", stored[0], stored[1]
        self.started = int(time.time())
        plans = [
            ("a", "completions", "chat-a", on(0, key_a), _chat(7, "a", cached_every=2), "/v1/chat/completions"),
            (self.s1_id, "completions", "chat-a", on(1, s1), _chat(5, "s1"), "/v1/chat/completions"),
            (self.s1_id, "embeddings", "embed", on(2, s1), _embed(4, "s1e"), "/v1/embeddings"),
            (self.s2_id, "completions", "chat-a", on(3, s2), _chat(3, "s2", cached_every=1), "/v1/chat/completions"),
            (self.s2_id, "audio_transcriptions", "asr", on(4, s2), _audio(2, "s2a"), "/v1/audio/transcriptions"),
        ]
        submitted = [
            (key, kind, model, client, create(client, lines, endpoint=endpoint))
            for key, kind, model, client, lines, endpoint in plans
        ]
        self.want: dict[tuple, Counter] = defaultdict(Counter)  # (key, kind, model) -> sums
        self.chat_lines: dict[str, int] = {}  # chat batch id -> lines
        for key, kind, model, client, batch in submitted:
            done = wait_for(client, batch.id, timeout=120)
            assert done.status == "completed", done
            output, errors = results_by_custom_id(client, done)
            assert errors == {} and len(output) == done.request_counts.total
            if kind == "completions":
                self.chat_lines[batch.id] = len(output)
            for line in output.values():
                usage = line["response"]["body"]["usage"]
                sums = self.want[(key, kind, model)]
                sums["requests"] += 1
                sums["input"] += usage.get("prompt_tokens", 0)
                sums["cached"] += usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
                sums["output"] += usage.get("completion_tokens", 0)
                sums["seconds"] += usage.get("seconds", 0)

    def window(self) -> dict:
        return {"start_time": self.started - 120, "end_time": int(time.time()) + 120}

    def stop(self) -> None:
        for replica in self.replicas[1:]:  # the first is start_app's
            replica.stop()
        self.fleet.kill()


@pytest.fixture(scope="module")
def chargeback(start_app, tmp_path_factory):
    setup = Chargeback(start_app, tmp_path_factory)
    try:
        yield setup
    finally:
        setup.stop()


def _results(page) -> list:
    return [r for bucket in page.data for r in bucket.results]


def test_usage_by_api_key_equals_the_output_files(chargeback):
    c = chargeback
    usage = c.admin.admin.organization.usage
    # The config key's id is the one grouped under proj-a.
    page = usage.completions(**c.window(), bucket_width="1m", limit=1440, group_by=["project_id", "api_key_id"])
    ids = {(r.project_id, r.api_key_id) for r in _results(page)}
    [key_a_id] = [k for p, k in ids if p == "proj-a"]
    assert key_a_id.startswith("key_") and {k for p, k in ids if p == "proj-s"} == {c.s1_id, c.s2_id}
    names = {"a": key_a_id, c.s1_id: c.s1_id, c.s2_id: c.s2_id}

    got: Counter = Counter()
    for r in _results(page):
        assert r.object == "organization.usage.completions.result"
        got[(r.api_key_id, "input")] += r.input_tokens
        got[(r.api_key_id, "cached")] += r.input_cached_tokens
        got[(r.api_key_id, "output")] += r.output_tokens
        got[(r.api_key_id, "requests")] += r.num_model_requests
    want: Counter = Counter()
    for (key, kind, _), sums in c.want.items():
        if kind == "completions":
            for name in ("input", "cached", "output", "requests"):
                want[(names[key], name)] += sums[name]
    assert got == want and want[(key_a_id, "cached")] == 4 * 3 and want[(c.s2_id, "cached")] == 3 * 3

    # The api_key_ids filter: only that key's lines, in one day bucket.
    [only] = _results(usage.completions(**c.window(), api_key_ids=[c.s2_id]))
    assert (only.input_tokens, only.num_model_requests, only.api_key_id) == (want[(c.s2_id, "input")], 3, None)
    assert _results(usage.completions(**c.window(), api_key_ids=["key_nobody"])) == []

    [embed] = _results(usage.embeddings(**c.window(), group_by=["api_key_id", "model"]))
    assert (embed.api_key_id, embed.model) == (c.s1_id, "embed")
    assert embed.input_tokens == c.want[(c.s1_id, "embeddings", "embed")]["input"] == 3 * (1 + 2 + 3 + 1)

    [audio] = _results(usage.audio_transcriptions(**c.window(), group_by=["api_key_id", "model"]))
    assert audio.object == "organization.usage.audio_transcriptions.result"
    assert (audio.api_key_id, audio.model, audio.num_model_requests, audio.seconds) == (c.s2_id, "asr", 2, 8)
    # Audio lines are not embeddings.
    assert all(r.model != "asr" for r in _results(usage.embeddings(**c.window(), group_by=["model"])))


def test_the_lines_ran_on_every_replica(chargeback):
    """Two replicas on Postgres (so usage is summed across them), one on SQLite."""
    ran = db.execute(chargeback.server, "SELECT DISTINCT replica FROM batch_shards WHERE lines_done > 0")
    assert len(ran) == len(chargeback.replicas)
    if len(chargeback.replicas) == 2:
        assert sorted(replica for (replica,) in ran) == ["replica-a", "replica-b"]


def test_group_by_batch_is_openais_true_with_batchds_batch_id(chargeback):
    c = chargeback
    usage = c.admin.admin.organization.usage
    page = usage.completions(**c.window(), group_by=["batch"], batch=True)
    results = _results(page)
    assert {r.batch for r in results} == {True}
    assert {r.model_extra["batch_id"]: r.num_model_requests for r in results} == c.chat_lines
    assert sorted(c.chat_lines.values()) == [3, 5, 7]
    assert _results(usage.completions(**c.window(), batch=False)) == []


def test_costs_equal_usage_times_configured_prices(chargeback):
    c = chargeback
    costs = c.admin.admin.organization.usage.costs

    def expected(key_filter) -> dict[str, Decimal]:
        lines: dict[str, Decimal] = defaultdict(Decimal)
        for (key, _, model), sums in c.want.items():
            if not key_filter(key):
                continue
            price = {k: Decimal(str(v)) for k, v in PRICES[model].items()}
            kept = 1 - price.get("batch_discount", Decimal("0.5"))
            per_m = Decimal(1_000_000)
            cached_price = price.get("cached_input", price.get("input", Decimal(0)))
            for item, quantity, unit_price in (
                ("input", sums["input"] - sums["cached"], price.get("input", 0) / per_m),
                ("cached input", sums["cached"], cached_price / per_m),
                ("output", sums["output"], price.get("output", 0) / per_m),
                ("audio", sums["seconds"], price.get("audio_minute", 0) / 60),
            ):
                if quantity:
                    lines[f"{model}, {item}"] += quantity * unit_price * kept
        return lines

    page = costs(**c.window(), group_by=["line_item"])
    got = {r.line_item: (r.amount.value, r.amount.currency, r.quantity_unit) for r in _results(page)}
    want = expected(lambda key: True)
    assert got == {
        item: (float(v), "usd", "duration_seconds" if item.endswith("audio") else "tokens") for item, v in want.items()
    }
    assert set(got) == {"chat-a, input", "chat-a, cached input", "chat-a, output", "embed, input", "asr, audio"}

    by_key = {r.api_key_id: r.amount.value for r in _results(costs(**c.window(), group_by=["api_key_id"]))}
    assert by_key[c.s1_id] == float(sum(expected(lambda key: key == c.s1_id).values()))
    assert by_key[c.s2_id] == float(sum(expected(lambda key: key == c.s2_id).values()))
    [key_a_id] = [k for k in by_key if k not in (c.s1_id, c.s2_id)]
    assert by_key[key_a_id] == float(sum(expected(lambda key: key == "a").values()))
    [total] = _results(costs(**c.window(), api_key_ids=[c.s1_id]))
    assert total.amount.value == by_key[c.s1_id] and total.api_key_id is None
    by_project = {r.project_id: r.amount.value for r in _results(costs(**c.window(), group_by=["project_id"]))}
    assert by_project == {
        "proj-a": by_key[key_a_id],
        "proj-s": float(sum(expected(lambda key: key in (c.s1_id, c.s2_id)).values())),
    }
    [item] = _results(costs(**c.window(), group_by=["line_item"], line_items=["asr, audio"]))
    assert (item.line_item, item.quantity) == ("asr, audio", 8)


@pytest.mark.parametrize(
    ("call", "params", "param"),
    [
        ("completions", {"page": "61"}, "page"),
        ("completions", {"page": "soon"}, "page"),
        ("completions", {"start_time": 10**20}, "start_time"),
        ("completions", {"user_ids": ["user_1"]}, "user_ids"),
        ("completions", {"group_by": ["user_id"]}, "group_by"),
        ("audio_transcriptions", {"group_by": ["batch"]}, "group_by"),
        ("costs", {"bucket_width": "1h"}, "bucket_width"),
        ("costs", {"group_by": ["model"]}, "group_by"),
        ("costs", {"limit": 181}, "limit"),
        ("costs", {"group_by": ["user_id"]}, "group_by"),
    ],
)
def test_bad_input_is_a_400_in_openais_envelope(chargeback, call, params, param):
    method = getattr(chargeback.admin.admin.organization.usage, call)
    with pytest.raises(openai.BadRequestError) as bad:
        method(**{"start_time": 0, "bucket_width": "1d", **params})
    assert bad.value.status_code == 400
    assert bad.value.body["type"] == "invalid_request_error" and bad.value.body["param"] == param


def test_project_keys_get_403(chargeback):
    project_admin = chargeback.server.client("unused", admin_api_key="key-a")
    for call in (project_admin.admin.organization.usage.costs, project_admin.admin.organization.usage.completions):
        with pytest.raises(openai.PermissionDeniedError) as refused:
            call(start_time=0)
        assert refused.value.body["code"] == "insufficient_permissions"
