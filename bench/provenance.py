"""Which commit each report in bench/results measured, and whether this branch still holds it.

A report's JSON records the commit it measured (`batchd_commit`, "+dirty" when uncommitted
changes were on top). A commit that is not in the history of the checked-out branch (a branch
commit later rebased or squashed away) describes no code in it: such a report's Markdown gets a
"Superseded" note under its title, and so does a report that records no commit.

    .venv/bin/python -m bench.provenance            # add the missing notes
    .venv/bin/python -m bench.provenance --check    # list reports missing one; exit 1 if any
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from bench.proc import CommandFailed, output

RESULTS = Path(__file__).with_name("results")
MARK = "> **Superseded:**"


def measured_commit(report: object) -> str | None:
    """The first `batchd_commit` anywhere in a report's JSON, without its "+dirty" suffix."""
    if isinstance(report, dict):
        found = report.get("batchd_commit")
        if isinstance(found, str) and found:
            return found.removesuffix("+dirty")
        values: Iterator[object] = iter(report.values())
    elif isinstance(report, list):
        values = iter(report)
    else:
        return None
    return next((c for c in map(measured_commit, values) if c), None)


def in_history(commit: str, repo: Path) -> bool:
    try:
        output(["git", "merge-base", "--is-ancestor", commit, "HEAD"], cwd=repo)
    except CommandFailed:
        return False
    return True


def superseded_note(report_json: Path, repo: Path) -> str | None:
    """The note `report_json`'s Markdown needs, or None when its commit is in this history."""
    commit = measured_commit(json.loads(report_json.read_text()))
    if commit is None:
        return f"{MARK} this report records no commit, so no code in this branch is known to be the one it measured."
    if in_history(commit, repo):
        return None
    return (
        f"{MARK} the commit it measured (`{commit}`) is not in this branch's history (a branch commit "
        "rebased or squashed away): its figures describe code main never had as such."
    )


def unmarked(results: Path = RESULTS, repo: Path | None = None) -> dict[Path, str]:
    """Reports whose Markdown lacks the note they need: {markdown path: note}."""
    repo = repo or results.parent.parent
    missing = {}
    for report_json in sorted(results.glob("*.json")):
        markdown = report_json.with_suffix(".md")
        note = superseded_note(report_json, repo)
        if note and markdown.exists() and MARK not in markdown.read_text():
            missing[markdown] = note
    return missing


def add_note(markdown: Path, note: str) -> None:
    """The note goes right under the title line."""
    title, _, rest = markdown.read_text().partition("\n")
    markdown.write_text(f"{title}\n\n{note}\n{rest}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only list the reports missing a note")
    args = parser.parse_args()
    missing = unmarked()
    for markdown, note in missing.items():
        print(f"{markdown}: {note}")
        if not args.check:
            add_note(markdown, note)
    return 1 if args.check and missing else 0


if __name__ == "__main__":
    sys.exit(main())
