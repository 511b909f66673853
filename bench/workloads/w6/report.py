"""W6's report body, drawn from its JSON document: with several rounds, each goal judged on the
median of its rounds, then each round."""

from __future__ import annotations

import statistics

from bench.report import Document, check_row, checks_table, passes, verdict
from bench.workloads.w6.checks import RATIO_GOAL, SHARE_TOLERANCE
from bench.workloads.w6.fleet import DELAY_MS, PER_URL, URLS


def _three_section(name: str, r: dict) -> list[str]:
    out = [
        f"## `{name}`: three projects, weights {r['weights']['team-a']}:1:1, {r['replicas']} replica(s)",
        "",
        f"Lines: {r['lines']}. Shares while team-a and team-b both had work: "
        f"{r['share_while_a_and_b_have_work']}. Fleet busy {r['busy_fraction']} from the first line to the "
        f"last, {r['busy_fraction_while_a_and_b']} while a and b both had work. {r['wall_seconds']} s.",
        "",
        *checks_table(r["checks"]),
        "",
        "| from (s) | team-a | team-b | team-c |",
        "|---|---|---|---|",
    ]
    out += [
        f"| {w['from_s']} | {w.get('team-a', 0):.2f} | {w.get('team-b', 0):.2f} | {w.get('team-c', 0):.2f} |"
        for w in r["windows"]
    ]
    return out + [""]


def _deadline_lines(r: dict) -> list[str]:
    return [
        f"1h batch created behind a 24h batch of the same project ({r['lines']} lines each, "
        f"{r['replicas']} replicas): the 1h batch took {r['hour_seconds']} s, the 24h batch {r['day_seconds']} s "
        f"(ratio {r['ratio']}, goal <= {RATIO_GOAL}); fleet busy {r['busy_fraction']}.",
        "",
    ]


def _twenty_section(name: str, r: dict) -> list[str]:
    out = [
        f"## `{name}`: twenty teams, two models, {r['replicas']} replicas, upstream window surplus "
        f"{r['window_surplus']}",
        "",
        f"Each model: a fleet of {r['fleet_per_model']}, `priority: true`. {r['wall_seconds']} s in all.",
        "",
        *checks_table(r["checks"]),
        "",
    ]
    out += _model_tables(r["models"])
    out += [
        "### Small batches (<= 100 lines), created to completed",
        "",
        "At weight share: the time the batch needs at its team's weight share of the fleet while the "
        "twenty teams have work (a goal under 3 s needs more than that share).",
        "",
        "| batch | lines | window | created | weight | status | seconds | at weight share (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    out += [
        f"| {s['batch']} | {s['lines']} | {s['window']} | {s['created']} | {s['weight']} | {s['status']} | "
        f"{s['seconds']} | {s['seconds_at_weight_share']} |"
        for s in r["small_batches"]
    ]
    out += ["", *_deadline_lines(r["deadline"])]
    return out


def _model_tables(models: dict) -> list[str]:
    """Each model's shares while all its teams had work, a row a team."""
    out: list[str] = []
    for model, m in models.items():
        window = m["common_window_s"]
        out += [
            f"### {model}: shares while all its teams had work ({window[0]}-{window[1]} s after its first line)",
            "",
            f"Fleet busy {m['busy_fraction']} from the first line to the last ({m['seconds']} s), "
            f"{m['busy_fraction_common_window']} in the common window. First/last line: seconds after the "
            "team's first batch on the model was created.",
            "",
            "| project | weight | lines | weight share | share | error | first line (s) | last line (s) | priorities |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in m["projects"]:
            error = f"{row['relative_error']:+.1%}" if row["relative_error"] is not None else "-"
            flag = (
                "" if row["relative_error"] is not None and abs(row["relative_error"]) <= SHARE_TOLERANCE else " **!**"
            )
            out.append(
                f"| {row['project']} | {row['weight']} | {row['lines']} | {row['expected_share']:.3f} | "
                f"{row['share'] if row['share'] is not None else '-'} | {error}{flag} | {row['first_line_s']} | "
                f"{row['last_line_s']} | {row['priorities']} |"
            )
        out.append("")
    return out


def _two_models_section(r: dict) -> list[str]:
    created = r["created_s"]
    return [
        f"## `two-models`: twenty projects on the first model, five of them also on the second, "
        f"{r['replicas']} replica",
        "",
        f"Each model: a fleet of {r['fleet_per_model']}, `priority: true`. Batches created in order, "
        f"a create every 50 ms: the first model's from {min(created.values())} s to the second model's last at "
        f"{max(created.values())} s. {r['wall_seconds']} s in all.",
        "",
        *checks_table(r["checks"]),
        "",
        *_model_tables(r["models"]),
    ]


def _inprocess_section(r: dict) -> list[str]:
    window = r["common_window_s"]
    out = [
        f"## `inprocess`: five projects on the in-process `{r['model']}`, one replica",
        "",
        f"Engine start-up {r['startup_seconds']} s; {r['lines_per_second']} lines/s; {r['seconds']} s from the "
        f"last creation to the last batch's end. Shares are of the lines completed (the batches' "
        f"request counts) {window[0] if window else '-'}-{window[1] if window else '-'} s after the last "
        f"creation, while every batch had lines completed and lines left. {r['wall_seconds']} s in all.",
        "",
        *checks_table(r["checks"]),
        "",
        "| project | weight | lines | weight share | share | error | status |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in r["projects"]:
        error = f"{row['relative_error']:+.1%}" if row["relative_error"] is not None else "-"
        out.append(
            f"| {row['project']} | {row['weight']} | {row['lines']} | {row['expected_share']:.3f} | "
            f"{row['share'] if row['share'] is not None else '-'} | {error} | {row['status']} |"
        )
    return out + [""]


def render(doc: Document) -> str:
    """The report's body from its JSON document (the writer adds the title, commit, machine and
    command): with several rounds, each goal judged on the median of its rounds, then each round."""
    rounds = doc.get("rounds") or [doc["results"]]
    out = [
        "Replicas on one Postgres and one blob directory in front of fake fleets, one per model "
        f"({URLS} URLs x {PER_URL} slots x {DELAY_MS} ms = {URLS * PER_URL * 1000 // DELAY_MS} lines/s each), "
        "whose waiting queues are served lowest priority first, then in arrival order (vLLM's "
        "priority scheduler). Shares are of the lines a fleet served (its request log), per project. "
        "Every scenario runs on batchd's defaults; the twenty-team ones say `priority: true` for their "
        f"models. {doc['seconds']:.0f} s in all.",
        "",
    ]
    if len(rounds) == 1:
        return "\n".join(out + _round_lines(rounds[0]))
    out += median_lines(rounds)
    for number, results in enumerate(rounds, 1):
        out += [f"# Round {number}", "", *_round_lines(results)]
    return "\n".join(out)


def median_lines(rounds: list[dict]) -> list[str]:
    """Each goal judged on the median of its rounds' measures (a share's is its absolute error)."""
    out = [
        f"## Goals: the median of {len(rounds)} rounds",
        "",
        "| scenario | check | "
        + " | ".join(f"round {i}" for i in range(1, len(rounds) + 1))
        + " | median | goal | result |",
        "|---|---|" + "---|" * len(rounds) + "---|---|---|",
    ]
    for name, first in rounds[0].items():
        for check in first["checks"]:
            same = [next(c for c in r[name]["checks"] if c["key"] == check["key"]) for r in rounds]
            middle = statistics.median(c["measure"] for c in same)
            shown = f"{middle:.1%}" if "+-" in check["goal"] else f"{round(middle, 3):g}"
            values = " | ".join(str(c["value"]) for c in same)
            result = verdict(passes(check["rule"], middle))
            out.append(f"| {name} | {check['key']} | {values} | {shown} | {check['goal']} | {result} |")
    return out + [""]


def _round_lines(results: dict) -> list[str]:
    out = ["## Goals", "", "| scenario | check | value | goal | result |", "|---|---|---|---|---|"]
    for name, r in results.items():
        out += [check_row(c, name) for c in r["checks"]]
    out.append("")
    for name, r in results.items():
        if name == "deadline":
            out += ["## `deadline`", "", *_deadline_lines(r)]
        elif name.startswith("twenty"):
            out += _twenty_section(name, r)
        elif name == "two-models":
            out += _two_models_section(r)
        elif name == "inprocess":
            out += _inprocess_section(r)
        else:
            out += _three_section(name, r)
    return out
