"""MkDocs hooks (mkdocs.yml `hooks:`): pages kept beside the code they describe join the site, and
the build fails when the settings or metrics table no longer matches the code.

- bench/README.md becomes benchmarks/index.md and bench/results' reports benchmarks/results/, so
  the README's relative links to its reports work on the site as in the repository;
- docker/README.md becomes docker-images.md.
"""

from __future__ import annotations

from pathlib import Path

import metrics_table  # beside this file; MkDocs puts a hook's directory on sys.path while loading it
import settings_table
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files, InclusionLevel
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
# (site path, file in the repository)
OUTSIDE_PAGES = [
    ("benchmarks/index.md", ROOT / "bench" / "README.md"),
    ("docker-images.md", ROOT / "docker" / "README.md"),
]
BENCH_RESULTS = ROOT / "bench" / "results"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, path in OUTSIDE_PAGES:
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    for report in sorted(BENCH_RESULTS.iterdir()):
        if report.suffix in (".md", ".png"):
            uri = f"benchmarks/results/{report.name}"
            # Reached from the benchmarks page's links, not listed in the navigation.
            files.append(File.generated(config, uri, abs_src_path=str(report), inclusion=InclusionLevel.NOT_IN_NAV))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    generated = {"configuration.md": settings_table.GENERATED, "observability.md": metrics_table.GENERATED}
    table = generated.get(page.file.src_uri)
    reason = table.stale(markdown) if table else None
    if reason:
        raise PluginError(reason)
    return markdown
