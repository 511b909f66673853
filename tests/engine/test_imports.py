"""Importing the engine layer stays cheap: vLLM, torch and transformers load only with the
in-process engines (app.engine.local), never with the protocol, the config, the upstream
engines or the boot module that picks between them."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIGHT = [
    "app.engine",
    "app.engine.protocol",
    "app.engine.boot",
    "app.engine.multiplexer",
    "app.engine.config.catalog",
    "app.engine.upstream.registry",
]


@pytest.mark.parametrize("module", LIGHT)
def test_light_import_does_not_load_vllm(module):
    code = (
        f"import sys, {module}\n"
        "heavy = [m for m in ('vllm', 'torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
