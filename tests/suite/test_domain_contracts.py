"""The domain contracts in pyproject.toml name their modules one by one (import-linter's wildcards
replace whole module names, not `*_routes`): every route, dependency and repository module of
app/domains is in them, so a new one cannot slip past `make lint`'s layering."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _contract(contract_id: str) -> dict:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["id"] == contract_id)


def _domain_modules() -> dict[str, set[str]]:
    kinds: dict[str, set[str]] = {"top": set(), "repository": set(), "service": set()}
    for path in (ROOT / "app" / "domains").rglob("*.py"):
        if path.name == "__init__.py":
            continue
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if path.stem.endswith("routes") or path.stem == "deps":
            kinds["top"].add(module)
        elif path.stem.endswith("repository"):
            kinds["repository"].add(module)
        else:
            kinds["service"].add(module)
    return kinds


def test_every_domain_module_is_in_the_layering_contracts():
    kinds = _domain_modules()
    assert kinds["top"] and kinds["repository"] and kinds["service"]
    on_top = _contract("domain-routes-on-top")
    assert set(on_top["forbidden_modules"]) == kinds["top"]
    assert set(on_top["source_modules"]) == kinds["service"] | kinds["repository"]
    bottom = _contract("domain-repositories-at-the-bottom")
    assert set(bottom["source_modules"]) == kinds["repository"]
    assert set(bottom["forbidden_modules"]) == kinds["service"]
    assert set(_contract("data-plane-never-imports-routes")["forbidden_modules"]) == kinds["top"]
