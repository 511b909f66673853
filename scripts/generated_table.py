"""A markdown table kept between two markers of a docs page and rewritten from code (the
settings and metrics tables): the page's copy, a rewrite, and the `--check` command line."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def row(*cells: str) -> str:
    """One markdown row: each cell on one line, its pipes escaped."""
    return "| " + " | ".join(" ".join(cell.split()).replace("|", "\\|") for cell in cells) + " |"


@dataclass(frozen=True)
class GeneratedTable:
    page: Path
    begin: str
    end: str
    what: str  # "settings", "metrics": named in the stale message
    script: str  # the generator's path from the repository root
    table: Callable[[], str]

    def page_table(self, text: str) -> str:
        """The table between the markers of the page's text."""
        start = text.index(self.begin) + len(self.begin)
        return text[start : text.index(self.end, start)].strip()

    def write(self, page: Path | None = None) -> bool:
        """Rewrite the page's table (or a copy's, at `page`); True when it changed."""
        page = page or self.page
        text = page.read_text()
        wanted = self.table()
        if self.page_table(text) == wanted:
            return False
        head, rest = text.split(self.begin, 1)
        page.write_text(f"{head}{self.begin}\n{wanted}\n{self.end}{rest.split(self.end, 1)[1]}")
        return True

    def stale(self, text: str) -> str | None:
        """Why the page's text holds another table than the generated one, or None."""
        if self.page_table(text) == self.table():
            return None
        return f"{self.page.relative_to(ROOT)}: the {self.what} table is stale; run python {self.script}"

    def main(self, description: str) -> int:
        parser = argparse.ArgumentParser(description=description)
        parser.add_argument("--check", action="store_true", help="exit 1 if the page's table is not the generated one")
        if parser.parse_args().check:
            reason = self.stale(self.page.read_text())
            if reason:
                print(reason)
            return 1 if reason else 0
        print("rewrote" if self.write() else "unchanged", self.page.relative_to(ROOT))
        return 0
