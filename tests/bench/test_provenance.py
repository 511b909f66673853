"""Every benchmark report records the commit it measured, and one whose commit is not in this
branch's history (or that records none) says so under its title (bench/provenance.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from bench import provenance


def test_every_report_whose_commit_left_the_history_is_marked_superseded():
    assert provenance.unmarked() == {}, "run: python -m bench.provenance"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def test_a_commit_rebased_away_is_found_and_marked_once(tmp_path):
    repo, results = tmp_path / "repo", tmp_path / "repo" / "results"
    results.mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "main")
    kept = _git(repo, "rev-parse", "--short", "HEAD")
    _git(repo, "checkout", "-q", "-b", "branch")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "gone")
    gone = _git(repo, "rev-parse", "--short", "HEAD")
    _git(repo, "checkout", "-q", "-")
    for name, commit in (("kept", f"{kept}+dirty"), ("gone", gone)):
        (results / f"{name}.json").write_text(json.dumps({"machine": {"batchd_commit": commit}}))
        (results / f"{name}.md").write_text(f"# {name}\n\nfigures\n")

    missing = provenance.unmarked(results, repo)
    assert list(missing) == [results / "gone.md"] and gone in missing[results / "gone.md"]
    provenance.add_note(results / "gone.md", missing[results / "gone.md"])
    assert provenance.unmarked(results, repo) == {}
    assert (results / "gone.md").read_text().startswith(f"# gone\n\n{provenance.MARK}")
