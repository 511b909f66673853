"""The user-facing pages speak of the product: no benchmark workload ids (W1..W10, W6-quote),
no issue numbers, no notes about the machine the project is built on. Those belong in
docs/development.md and bench/, which this test leaves alone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted(
    [ROOT / "README.md", ROOT / "docker" / "README.md"]
    + [p for p in (ROOT / "docs").glob("*.md") if p.name != "development.md"]
)
FORBIDDEN = {
    "a workload id": re.compile(r"\bW(?:10|[1-9])(?:-[a-z][\w-]*)?\b"),
    "an issue number": re.compile(r"(?<![\w/&])#\d+\b|\bissues?/\d+\b|\bissue \d+\b"),
    "the build machine": re.compile(
        r"\bthis (?:machine|host|box)\b|\bon this host\b|\bbuild (?:machine|host)\b|\bthe project's machines\b"
        r"|\bmeasured (?:here|on this)\b|\b\d+ (?:busy |shared )?(?:cores|CPUs)\b|\bload average\b",
        re.I,
    ),
}


def offences(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in FORBIDDEN.items():
            for match in pattern.finditer(line):
                found.append(f"{number}: {what}: {match.group(0)!r}")
    return found


def test_the_patterns_catch_what_they_are_for() -> None:
    for text in (
        "bench W6-quote",
        "see W10",
        "planned (issue #48)",
        "fixed in #56.",
        "measured on this machine",
        "on 2 cores",
        "5 minutes on 2 busy CPUs",
        "on the build host",
    ):
        assert offences(text), text
    for text in ("[Models](models.md#upstream-fleets)", "a 200 W GPU", "`W`", "HTTP 404", "&#8203;"):
        assert not offences(text), text


def test_user_pages_name_no_workload_issue_or_build_machine() -> None:
    assert len(PAGES) > 10
    found = [f"{page.relative_to(ROOT)}:{o}" for page in PAGES for o in offences(page.read_text())]
    assert not found, "\n".join(found)
