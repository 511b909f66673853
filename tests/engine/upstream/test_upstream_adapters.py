"""LoRA adapters of an upstream fleet (issue #49): the adapters a fleet's `GET /v1/models` lists
with the model as `parent` (as `vllm serve --lora-modules` does) are served under their own ids,
on their base's URLs; `upstream.adapters: false` turns that off; the set follows the fleet's
list. Fake upstreams (harness/fake_upstream.py) in this process, no engines."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter, defaultdict

import orjson
import pytest

from app.core.statuses import UpstreamState
from app.engine.config.upstream import UpstreamSpec
from app.engine.upstream.discovery import Probe, read_models
from app.engine.upstream.registry import UpstreamRegistry
from harness.fake_upstream import FakeUpstream
from harness.health import ADMIN_ENV, ADMIN_KEY
from harness.poll import wait_until, wait_until_async
from tests.conftest import API_KEYS_ENV
from tests.support.batches import create, results_by_custom_id, wait_for
from tests.support.upstreams import fake_upstream_in_thread

CHAT = "/v1/chat/completions"


def _models(*cards: dict) -> bytes:
    return orjson.dumps({"object": "list", "data": list(cards)})


# -- what a probe reads -------------------------------------------------------


def test_a_probe_reads_the_adapters_listed_on_the_model():
    raw = _models(
        {"id": "base", "object": "model", "parent": None},
        {"id": "tl", "object": "model", "parent": "base"},
        {"id": "sql", "object": "model", "parent": "base", "root": "/adapters/sql"},
        {"id": "other", "object": "model"},
        {"id": "of-other", "object": "model", "parent": "other"},
    )
    assert read_models(raw, "base") == Probe(UpstreamState.UP, "", frozenset({"tl", "sql"}))
    assert read_models(raw, "other") == Probe(UpstreamState.UP, "", frozenset({"of-other"}))


def test_a_probe_without_adapters_or_the_model():
    assert read_models(_models({"id": "base", "object": "model"}), "base") == Probe(UpstreamState.UP)
    # No id, an id that is not a string, the model as its own parent: not adapters.
    odd = _models({"id": "base", "parent": "base"}, {"parent": "base"}, {"id": 7, "parent": "base"})
    assert read_models(odd, "base") == Probe(UpstreamState.UP)
    missing = read_models(_models({"id": "tl", "parent": "other"}), "base")
    assert (missing.state, missing.adapters) == (UpstreamState.NO_MODEL, frozenset())
    for garbage in (b"<html>", b"[1, 2]", b'{"data": [1]}', b'{"data": null}'):
        assert read_models(garbage, "base").state == UpstreamState.DOWN, garbage


# -- the registry: routing and what several URLs list ---------------------------


def _chat(model: str, text: str = "hi") -> dict:
    return {"model": model, "messages": [{"role": "user", "content": text}]}


async def _registry_of_two_urls() -> None:
    first, second = FakeUpstream("m", 0.0, 8, loras=["tl", "x"]), FakeUpstream("m", 0.0, 8, loras=["tl"])
    with fake_upstream_in_thread(first) as url_a, fake_upstream_in_thread(second) as url_b:
        # "taken" is served in process: the fleet's adapter of that name is not served here.
        second.loras.append("taken")
        first.loras.append("taken")
        registry = UpstreamRegistry()
        spec = UpstreamSpec("base", (url_a, url_b), model="m", health_interval_s=0.1, max_concurrency=3)
        await registry.start([spec], taken=["taken"])
        try:
            # Only what every URL in the rotation lists: a line may go to either.
            assert registry.names == ["base", "tl"]
            assert registry.model_cards()[1] | {"created": 0} == {
                "id": "tl",
                "object": "model",
                "created": 0,
                "owned_by": "batchd",
                "parent": "base",
            }
            assert registry.engine_state("tl") == registry.engine_state("base") == "ready"
            assert registry.endpoints_for("tl") == registry.endpoints_for("base")
            assert registry.suggested_concurrency("tl") == registry.suggested_concurrency("base") == 12
            assert registry.validate_line(CHAT, _chat("x")).code == "model_not_found"
            assert registry.validate_line(CHAT, _chat("tl")) is None

            replies = [await registry.execute(CHAT, _chat(m), f"r{i}") for i, m in enumerate(["tl", "base"] * 2)]
            assert [(r.status_code, r.body["model"]) for r in replies] == [(200, "tl"), (200, "m")] * 2
            assert replies[0].body["choices"][0]["message"]["content"] == "fake answer (tl)"
            assert (replies[0].usage.input_tokens, replies[0].usage.output_tokens) == (5, 2)
            assert first.stats["model:tl"] + second.stats["model:tl"] == 2

            # The second URL loads x: served from the next probes on, without a restart.
            second.loras.append("x")
            await wait_until_async(lambda: "x" in registry.names, 10, "x served")
            assert (await registry.execute(CHAT, _chat("x"), "rx")).body["model"] == "x"
            # One URL drops tl: no longer served (its lines could go to that URL).
            first.loras.remove("tl")
            await wait_until_async(lambda: "tl" not in registry.names, 10, "tl gone")
            reply = await registry.execute(CHAT, _chat("tl"), "gone")
            assert (reply.status_code, reply.body["error"]["code"]) == (404, "model_not_found")
        finally:
            await registry.shutdown()


def test_the_registry_serves_what_every_url_in_rotation_lists():
    asyncio.run(_registry_of_two_urls())


async def _adapters_off_or_out_of_rotation() -> None:
    fake = FakeUpstream("m", 0.0, 8, loras=["tl"])
    with fake_upstream_in_thread(fake) as url:
        registry = UpstreamRegistry()
        off = UpstreamSpec("quiet", (url,), model="m", adapters=False, health_interval_s=0.1)
        on = UpstreamSpec("live", (url,), model="m", health_interval_s=0.1)
        await registry.start([off, on])
        try:
            assert registry.names == ["quiet", "live", "tl"]
            assert [c.get("parent") for c in registry.model_cards()] == [None, None, "live"]
            # No URL in the rotation: the adapter stays, as down as its base.
            fake.model = "renamed"
            await wait_until_async(lambda: registry.engine_state("live") == "dead", 10, "live down")
            assert registry.names == ["quiet", "live", "tl"] and registry.engine_state("tl") == "dead"
        finally:
            await registry.shutdown()
        assert registry.engine_state("tl") == "stopped"
        with pytest.raises(KeyError):
            registry.suggested_concurrency("nope")


def test_adapters_when_turned_off_or_out_of_rotation():
    asyncio.run(_adapters_off_or_out_of_rotation())


# -- through the API, with the official client ----------------------------------

MODELS = {
    # served name: (the fake's model, its adapters, adapters served)
    "chat": ("fake-model", ["tl", "t2"], True),
    "quiet": ("quiet-model", ["hidden"], False),
    "dyn": ("dyn-model", ["d1"], True),
}


@pytest.fixture(scope="module")
def fleets():
    fakes = {name: FakeUpstream(model, 0.0, 64, loras=loras) for name, (model, loras, _) in MODELS.items()}
    with (
        fake_upstream_in_thread(fakes["chat"]) as chat,
        fake_upstream_in_thread(fakes["quiet"]) as quiet,
        fake_upstream_in_thread(fakes["dyn"]) as dyn,
    ):
        yield fakes, {"chat": chat, "quiet": quiet, "dyn": dyn}


@pytest.fixture(scope="module")
def server(start_app, fleets, tmp_path_factory):
    fakes, urls = fleets
    blocks = {
        name: {"upstream": {"urls": [urls[name]], "model": model, "health_interval_s": 0.2, "adapters": on}}
        for name, (model, _, on) in MODELS.items()
    }
    config = tmp_path_factory.mktemp("upstream-adapters") / "models.json"
    config.write_text(json.dumps({"models": blocks}))
    return start_app(
        {"BATCHD_API_KEYS": API_KEYS_ENV, **ADMIN_ENV, "BATCHD_MODEL_CONFIG_FILE": str(config)}, models=True
    )


@pytest.fixture
def client(server):
    return server.client("key-a")


def _line(custom_id: str, model: str) -> dict:
    return {"custom_id": custom_id, "method": "POST", "url": CHAT, "body": _chat(model, custom_id)}


def _refused(client, lines: list[dict]) -> list[tuple[str, int | None]]:
    """The validation errors of a batch of `lines` (a line naming a model not served fails the
    batch with `model_not_found`, or with `model_mismatch` after a line of a served model)."""
    batch = wait_for(client, create(client, lines).id, timeout=60)
    assert batch.status == "failed" and batch.errors is not None, batch
    return [(e.code, e.line) for e in batch.errors.data]


def test_models_lists_the_adapters_with_their_base_as_parent(client):
    cards = {m.id: m for m in client.models.list().data}
    assert {name: card.parent for name, card in cards.items()} == {
        "chat": None,
        "quiet": None,
        "dyn": None,
        "tl": "chat",
        "t2": "chat",
        "d1": "dyn",
    }
    assert {card.engine_state for card in cards.values()} == {"ready"}
    assert client.models.retrieve("tl").parent == "chat"


def test_a_batch_mixing_a_base_and_its_adapters(client, server, fleets):
    fakes, _ = fleets
    before = Counter(fakes["chat"].stats)
    started = int(time.time())
    lines = [_line(f"{model}-{i}", model) for i in range(3) for model in ("chat", "tl", "t2")]
    batch = wait_for(client, create(client, lines).id, timeout=60)
    assert batch.status == "completed" and batch.request_counts.completed == len(lines), batch
    output, errors = results_by_custom_id(client, batch)
    assert errors == {}
    answers = {
        custom_id: (r["response"]["body"]["model"], r["response"]["body"]["choices"][0]["message"]["content"])
        for custom_id, r in output.items()
    }
    for i in range(3):
        assert answers[f"chat-{i}"] == ("fake-model", "fake answer")
        assert answers[f"tl-{i}"] == ("tl", "fake answer (tl)")
        assert answers[f"t2-{i}"] == ("t2", "fake answer (t2)")
    received = Counter(fakes["chat"].stats) - before
    assert {k: v for k, v in received.items() if k.startswith("model:")} == {
        "model:fake-model": 3,
        "model:tl": 3,
        "model:t2": 3,
    }

    # Usage is booked under the name each line gave.
    admin = server.client("unused", admin_api_key=ADMIN_KEY).admin.organization.usage
    page = admin.completions(
        start_time=started - 60, end_time=int(time.time()) + 60, bucket_width="1m", group_by=["batch", "model"]
    )
    booked: dict[str, Counter] = defaultdict(Counter)
    for bucket in page.data:
        for r in bucket.results:
            if r.model_extra["batch_id"] == batch.id:
                booked[r.model].update(requests=r.num_model_requests, input=r.input_tokens, output=r.output_tokens)
    assert booked == {m: Counter(requests=3, input=15, output=6) for m in ("chat", "tl", "t2")}


def test_an_adapter_of_another_model_does_not_mix(client):
    assert _refused(client, [_line("a", "tl"), _line("b", "d1")]) == [("model_mismatch", 2)]


def test_adapters_off_are_not_served(client, fleets):
    fakes, _ = fleets
    assert "hidden" in fakes["quiet"].loras
    assert "hidden" not in {m.id for m in client.models.list().data}
    assert _refused(client, [_line("h", "hidden")]) == [("model_not_found", 1)]
    batch = wait_for(client, create(client, [_line("q", "quiet")]).id, timeout=60)
    assert batch.status == "completed", batch


def test_adapters_follow_the_fleets_list(client, fleets):
    fakes, _ = fleets
    dyn = fakes["dyn"]

    def listed() -> set[str]:
        return {m.id for m in client.models.list().data if m.parent == "dyn"}

    try:
        dyn.loras = ["d2"]  # d1 unloaded, d2 loaded: no restart
        wait_until(lambda: listed() == {"d2"}, 15, lambda: f"dyn's adapters: {listed()}")
        assert _refused(client, [_line("b", "d1")]) == [("model_not_found", 1)]
        batch = wait_for(client, create(client, [_line("a", "dyn"), _line("b", "d2")]).id, timeout=60)
        assert batch.status == "completed", batch
        output, _ = results_by_custom_id(client, batch)
        assert output["b"]["response"]["body"]["choices"][0]["message"]["content"] == "fake answer (d2)"
    finally:
        dyn.loras = ["d1"]
        wait_until(lambda: listed() == {"d1"}, 15, lambda: f"dyn's adapters: {listed()}")
