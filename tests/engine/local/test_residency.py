"""The residency manager with fake loads (no vLLM): lines of a model with no engine wait, the
engine in the way drains and is unloaded before the needed one loads (never two at once with a
budget of one), a busy engine stays until work waiting for another is at risk (read by batch id
when the swap is planned), and every line runs exactly once."""

from __future__ import annotations

import asyncio
import time

from app.core import metrics
from app.engine.errors import EngineUnavailableError
from app.engine.local.residency import Residency
from app.scheduling.residency import SwapReason, Urgency

HOUR, DAY = Urgency(deadline=3_600.0), Urgency(deadline=86_400.0)
RISKY_HOUR = Urgency(ahead=True, deadline=3_600.0)  # no lookup: at risk as granted


def _swaps(reason: SwapReason) -> float:
    return metrics.ENGINE_SWAPS.labels(reason)._value.get()


class Engines:
    """Loads and unloads by name, recording the order and how many were loaded at once."""

    def __init__(self, loaded: set[str]) -> None:
        self.loaded = set(loaded)
        self.events: list[str] = []
        self.most_at_once = len(loaded)
        self.ran: list[tuple[str, int]] = []

    async def load(self, name: str) -> None:
        await asyncio.sleep(0.01)
        self.loaded.add(name)
        self.most_at_once = max(self.most_at_once, len(self.loaded))
        self.events.append(f"load {name}")

    async def unload(self, name: str) -> None:
        await asyncio.sleep(0.01)
        self.loaded.discard(name)
        self.events.append(f"unload {name}")


async def _line(residency: Residency, engines: Engines, model: str, number: int, urgency: Urgency) -> None:
    async with residency.use(model, urgency):
        assert model in engines.loaded, f"{model} line {number} ran with no engine"
        await asyncio.sleep(0.005)
        engines.ran.append((model, number))


async def _lines(residency: Residency, engines: Engines, model: str, count: int, urgency: Urgency) -> None:
    """`count` lines of `model` in four streams, each line after the one before it."""

    async def stream(first: int) -> None:
        for number in range(first, count, 4):
            await _line(residency, engines, model, number, urgency)

    await asyncio.gather(*(stream(first) for first in range(4)))


def test_lines_of_an_unloaded_model_wait_while_on_time_and_are_loaded_once_their_batch_is_at_risk():
    """A 24h batch keeps `embed` busy; the 1h batch's lines for `chat` wait while the scheduler
    says it is on time, and preempt once it says it is at risk (read by batch id at each plan)."""
    at_risk: set[str] = set()
    chat_urgency = Urgency(deadline=3_600.0, batch_id="batch_chat", risk=at_risk.__contains__)
    before = {reason: _swaps(reason) for reason in SwapReason}

    async def scenario():
        engines = Engines({"chat"})
        residency = Residency({"chat": True, "embed": True}, 1, 0.1, engines.load, engines.unload)
        residency.start(["chat"])
        try:
            embed = asyncio.create_task(_lines(residency, engines, "embed", 400, DAY))
            # The idle chat engine gives way to the embeddings, which start running.
            while not any(model == "embed" for model, _ in engines.ran):
                await asyncio.sleep(0.001)
            chat = asyncio.create_task(_lines(residency, engines, "chat", 20, chat_urgency))
            # On time: well past the minimum residency, the busy embeddings engine stays.
            while sum(model == "embed" for model, _ in engines.ran) < 150:
                await asyncio.sleep(0.001)
            on_time_events = list(engines.events)
            at_risk.add("batch_chat")
            await asyncio.wait_for(asyncio.gather(embed, chat), 10)
        finally:
            await residency.close()
        return engines, on_time_events

    engines, on_time_events = asyncio.run(scenario())
    assert on_time_events == ["unload chat", "load embed"]
    assert engines.most_at_once == 1
    assert sorted(engines.ran) == sorted([("embed", i) for i in range(400)] + [("chat", i) for i in range(20)])
    # At risk, the 1h lines preempted the 24h ones, which ran last.
    assert engines.events == ["unload chat", "load embed", "unload embed", "load chat", "unload chat", "load embed"]
    last_chat = max(n for n, (model, _) in enumerate(engines.ran) if model == "chat")
    first_chat = min(n for n, (model, _) in enumerate(engines.ran) if model == "chat")
    assert all(model == "chat" for model, _ in engines.ran[first_chat : last_chat + 1])
    assert first_chat >= 150 and engines.ran[-1][0] == "embed"
    # Each swap counted by its reason: two for drained engines, one for the batch at risk.
    after = {reason: _swaps(reason) - before[reason] for reason in SwapReason}
    assert after == {
        SwapReason.ROOM: 0,
        SwapReason.DRAINED: 2,
        SwapReason.AT_RISK: 1,
        SwapReason.DUE_EARLIER: 0,
        SwapReason.TURN: 0,
    }


def test_a_busy_engine_with_nothing_waiting_at_risk_stays_until_it_drains():
    async def scenario():
        engines = Engines({"a"})
        residency = Residency({"a": True, "b": True}, 1, 0.05, engines.load, engines.unload)
        residency.start(["a"])
        stop = asyncio.Event()

        async def stream(model: str, until: asyncio.Event | None) -> int:
            count = 0
            while until is None or not until.is_set():
                await _line(residency, engines, model, count, DAY)
                count += 1
                if until is None and count == 50:
                    break
            return count

        try:
            a = [asyncio.create_task(stream("a", stop)) for _ in range(2)]
            b = asyncio.create_task(stream("b", None))
            await asyncio.sleep(1.0)  # twenty times a's minimum residency
            events_while_busy = list(engines.events)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*a, b), 10)
        finally:
            await residency.close()
        return engines, events_while_busy

    engines, events_while_busy = asyncio.run(scenario())
    assert events_while_busy == []  # b's lines are on time: a keeps its engine
    assert engines.events == ["unload a", "load b"]  # and once a drains, b gets it
    assert sum(model == "b" for model, _ in engines.ran) == 50


def test_single_requests_to_another_model_wait_for_a_busy_engine_and_a_flex_one_gives_up_in_time():
    """A busy 24h batch on `a`, background responses to `b` every 0.15 s (35 s, compressed): none
    swaps `a` out while it is busy; they run once it is idle. A flex request that cannot start
    within its wait fails (its call answers 429) instead of waiting for `a` to be done."""

    async def scenario():
        engines = Engines({"a"})
        residency = Residency({"a": True, "b": False}, 1, 0.1, engines.load, engines.unload, min_load_interval=0.0)
        residency.start(["a"])
        stop = asyncio.Event()

        async def batch() -> None:
            count = 0
            while not stop.is_set():
                await _line(residency, engines, "a", count, DAY)
                count += 1

        async def flex() -> str:
            urgency = Urgency(deadline=time.time() + 60, single=True, start_by=time.time() + 0.3)
            try:
                await _line(residency, engines, "b", -1, urgency)
            except EngineUnavailableError as exc:
                return exc.code
            return "ran"

        try:
            streams = [asyncio.create_task(batch()) for _ in range(4)]
            responses = []
            flexed = asyncio.create_task(flex())
            for number in range(8):
                await asyncio.sleep(0.15)
                single = Urgency(deadline=time.time() + 60, single=True)
                responses.append(asyncio.create_task(_line(residency, engines, "b", number, single)))
            events_while_busy = list(engines.events)
            stop.set()
            await asyncio.wait_for(asyncio.gather(*streams, *responses), 10)
            return engines, events_while_busy, await flexed
        finally:
            await residency.close()

    engines, events_while_busy, flexed = asyncio.run(scenario())
    assert events_while_busy == []  # 1.2 s of `a`'s turn, 12 times its minimum residency
    assert engines.events == ["unload a", "load b"]
    assert sorted(n for model, n in engines.ran if model == "b") == list(range(8))
    assert flexed == "engine_unavailable"


def test_a_model_is_not_loaded_in_place_of_a_busy_engine_again_within_the_min_load_interval():
    """One-line 1h batches at risk to `b` every 0.05 s while a 24h batch keeps `a` busy: each preempts
    `a` after its minimum residency (0.05 s), but `b` is loaded at most once per 0.5 s."""

    async def scenario():
        engines = Engines({"a"})
        residency = Residency({"a": True, "b": False}, 1, 0.05, engines.load, engines.unload, min_load_interval=0.5)
        residency.start(["a"])
        stop = asyncio.Event()
        loads_at: list[float] = []
        load = engines.load

        async def timed_load(name: str) -> None:
            await load(name)
            if name == "b":
                loads_at.append(time.monotonic())

        residency._load = timed_load

        async def batch() -> None:
            count = 0
            while not stop.is_set():
                await _line(residency, engines, "a", count, DAY)
                count += 1

        try:
            streams = [asyncio.create_task(batch()) for _ in range(4)]
            started = time.monotonic()
            lines = []
            while time.monotonic() - started < 1.6:
                await asyncio.sleep(0.05)
                lines.append(asyncio.create_task(_line(residency, engines, "b", len(lines), RISKY_HOUR)))
            busy_loads = list(loads_at)  # an idle `a` gives way at once: only these are preemptions
            stop.set()
            await asyncio.wait_for(asyncio.gather(*streams, *lines), 10)
        finally:
            await residency.close()
        return busy_loads, engines, len(lines)

    loads_at, engines, sent = asyncio.run(scenario())
    gaps = [later - earlier for earlier, later in zip(loads_at, loads_at[1:], strict=False)]
    assert 2 <= len(loads_at) <= 4, loads_at  # 1.6 s: a load of b at most every 0.5 s (~32 lines sent)
    assert all(gap >= 0.5 for gap in gaps), gaps
    assert sorted(n for model, n in engines.ran if model == "b") == list(range(sent))


def test_under_a_memory_budget_a_model_that_needs_two_engines_room_waits_for_both_to_unload():
    """`a` and `c` (4 GiB each) are loaded and idle; `b` needs 8 of the 10 GiB: each swap unloads
    one, and `b` loads only once both are gone, the loaded engines' needs never above the budget."""
    gib = 1 << 30
    needs = {"a": 4 * gib, "b": 8 * gib, "c": 4 * gib}

    async def scenario():
        engines = Engines({"a", "c"})
        most_memory = [sum(needs[m] for m in engines.loaded)]
        load = engines.load

        async def load_counting(name: str) -> None:
            await load(name)
            most_memory.append(sum(needs[m] for m in engines.loaded))

        residency = Residency(
            {"a": True, "b": True, "c": True},
            None,
            0.05,
            load_counting,
            engines.unload,
            memory=needs,
            memory_budget=10 * gib,
        )
        residency.start(["a", "c"])
        try:
            await asyncio.wait_for(_lines(residency, engines, "b", 8, DAY), 10)
        finally:
            await residency.close()
        return engines, max(most_memory)

    engines, most_memory = asyncio.run(scenario())
    assert engines.events in (["unload a", "unload c", "load b"], ["unload c", "unload a", "load b"])
    assert most_memory <= 10 * gib
    assert sorted(n for model, n in engines.ran if model == "b") == list(range(8))


def test_an_idle_engine_gives_way_only_after_the_drain_grace_and_not_if_its_lines_come_back():
    """With a drain grace, the engine loaded at start stays while its own lines come within the
    grace of another model's wait (a batch still validating), and gives way once it has had none
    for the grace."""

    async def scenario():
        engines = Engines({"chat"})
        residency = Residency({"chat": True, "embed": True}, 1, 0.0, engines.load, engines.unload, drain_grace=0.5)
        residency.start(["chat"])
        try:
            embed = asyncio.create_task(_lines(residency, engines, "embed", 8, DAY))
            await asyncio.sleep(0.1)  # chat's batch comes 0.1 s later: chat keeps its engine
            await _lines(residency, engines, "chat", 40, DAY)
            assert engines.events == [] and "embed" not in engines.loaded
            chat_done = time.monotonic()
            await embed  # then embed's lines wait out the grace from chat's last line, and run
            assert time.monotonic() - chat_done >= 0.5
            assert engines.events == ["unload chat", "load embed"]
            assert engines.loaded == {"embed"} and engines.most_at_once == 1
        finally:
            await residency.close()

    asyncio.run(scenario())
