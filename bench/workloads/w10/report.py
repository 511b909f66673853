"""W10's Markdown, drawn from its JSON document (the writer adds the title, commit, machine and
command)."""

from __future__ import annotations

from bench.report import Document, checks_table
from bench.workloads.w10.checks import LOADS_MAX, MAKESPAN_RATIO_MAX, WORK_RATIO_MAX
from bench.workloads.w10.measure import SAMPLE_S
from bench.workloads.w10.plan import BUDGET, CHAT_B, CHAT_MAX_TOKENS, SECOND_WAVE_DELAY_S, SYSTEMS

SUMMARY = (
    ("makespan_s", "makespan (s)"),
    ("idle_waiting_s", "idle while work waits (s)"),
    ("busy_fraction", "busy fraction"),
    ("loads", "engine loads"),
    ("load_seconds", "load seconds"),
    ("no_engine_s", "no engine loaded (s)"),
    ("worst_1h_finish_s", "worst 1h finish (s)"),
    ("startup_s", "start-up (s)"),
)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _plan_text(doc: Document) -> str:
    waves: dict[str, list[str]] = {"24h": [], "1h": []}
    for b in doc["plan"]:
        waves[b["window"]].append(f"{b['batch']} ({b['lines']:,})")
    return f"24h wave: {', '.join(waves['24h'])}; 1h wave: {', '.join(waves['1h'])}"


def _system_line(run: dict) -> str:
    if run.get("error"):
        return f"**failed**: {run['error']}"
    by_model = ", ".join(f"{m} {n}" for m, n in run["loads_by_model"].items()) or "none"
    return (
        f"makespan {run['makespan_s']} s, busy {run['busy_fraction']}, {run['loads']} loads ({by_model}; "
        f"{run['load_seconds']} s; no engine loaded {run.get('no_engine_s')} s), worst 1h finish {run['worst_1h_finish_s']} s, start-up {run['startup_s']} s"
    )


def _timeline(run: dict) -> str:
    events = run.get("timeline") or []
    return "; ".join(f"{t:g} s {model} {what}" for t, model, what in events) or "-"


def _batches(run: dict) -> list[str]:
    out = [
        "| batch | model | window | lines | created (s) | ended (s) | finish (s) | status | in window "
        "| lost | duplicated | failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in run["batches"]:
        cells = [
            r["batch"],
            r["model"],
            r["window"],
            f"{r['lines']:,}",
            r["created_s"],
            r["ended_s"],
            r["finish_s"],
            r["status"],
            "yes" if r["deadline_met"] else "**no**",
            r["lost"],
            r["duplicated"],
            r["failed"],
        ]
        out.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return out


def render(doc: Document) -> str:
    rounds = doc["rounds"]
    out = [
        f"Two systems on the same work, a fresh `batchd serve` (SQLite, every other setting at its default) "
        f"each round, interleaved (the order swaps every round): **budget** `--max-resident-engines "
        f"{doc['budget_engines']}` (`BATCHD_MIN_RESIDENCY_SECONDS` {doc['min_residency_seconds']:g}) and "
        f"**resident** (no limit: every engine loaded throughout). Three models in process on CPU: "
        f"{', '.join(f'`{m}`' for m in doc['models'])} (`{CHAT_B}` is the built-in tiny chat model "
        f"served under a second name: an engine of its own); engines "
        f"{'eager (no torch.compile)' if doc['eager'] else 'with torch.compile'}. On the budget system "
        f"the first model's engine is the one loaded at start. Each round creates, on each system, the "
        f"{_plan_text(doc)}, {SECOND_WAVE_DELAY_S:g} s after the last 24h batch; chat lines ask for "
        f"{CHAT_MAX_TOKENS} tokens. Scale {doc['scale']:g}; {doc['seconds']:.0f} s in all.",
        "",
        "Measures: **makespan** from the first create call to the last batch seen ended (polled every "
        f"0.25 s); a batch's **finish** from its own create call to its end; **busy** the time some "
        "model had its engine loaded (`/v1/models`: `loaded`) and lines in flight on it "
        f"(`lines_in_flight`), sampled every {SAMPLE_S:g} s (lines waiting for their engine to load count "
        "as idle), **busy fraction** busy / makespan and **idle while work waits** makespan less busy "
        "(work waits throughout the makespan: the seconds no engine ran a line); **engine loads** and **load seconds** from "
        "`batchd_engine_loads_total` and `batchd_engine_load_seconds_sum` over the round (the start-up's "
        "engine starts are not loads: both systems start every engine once); **no engine loaded** the "
        "time no model had its engine loaded (a swap's unload and load, from the same samples); lines: each batch's "
        "output and error files against its input's custom_ids.",
        "",
        f"## Goals ({len(rounds)} round{'s' if len(rounds) != 1 else ''})",
        "",
        *checks_table(doc["checks"]),
        "",
        f"Goals: every 1h batch completed within its window on the budget system; makespan ratio <= "
        f"{MAKESPAN_RATIO_MAX}x and (budget makespan - its load seconds) / resident makespan <= "
        f"{WORK_RATIO_MAX}x, each the median of same-round ratios; at most {LOADS_MAX} engine loads in "
        "any round on the budget system; no batch failed, no line lost or duplicated.",
        "",
        "## Medians of rounds",
        "",
        "| system | " + " | ".join(label for _, label in SUMMARY) + " |",
        "|---|" + "---|" * len(SUMMARY),
    ]
    for system in SYSTEMS:
        figures = doc["summary"].get(system, {})
        out.append(f"| {system} | " + " | ".join(_cell(figures.get(key)) for key, _ in SUMMARY) + " |")
    out += [
        "",
        "## Rounds",
        "",
        "| round | order | makespan budget / resident | (makespan - load s) / resident |",
        "|---|---|---|---|",
    ]
    for r in rounds:
        out.append(
            f"| {r['round']} | {' then '.join(r['order'])} | {_cell(r['ratios']['makespan'])} | "
            f"{_cell(r['ratios']['work'])} |"
        )
    for r in rounds:
        out += ["", f"### Round {r['round']}", ""]
        for system in r["order"]:
            run = r["systems"][system]
            out += [f"**{system}**: {_system_line(run)}.", ""]
            if system == BUDGET and not run.get("error"):
                out += [f"Engines (seconds after the first create): {_timeline(run)}.", ""]
            if not run.get("error"):
                out += [*_batches(run), ""]
    return "\n".join(out)
