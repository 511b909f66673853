"""Modules imported on first use: every pytest-xdist worker imports every test module to collect
it, so a test module's top-level import of a large package (anthropic: ~1.4 s of CPU) is paid
once per worker even where its tests are deselected."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


class LazyModule:
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: ModuleType | None = None

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith(("_", "pytest")):  # pytest's probes of a test module's names
            raise AttributeError(attribute)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attribute)


anthropic: Any = LazyModule("anthropic")
