"""Importing app.engine stays cheap: vLLM loads only with EngineRegistry."""

from __future__ import annotations

import subprocess
import sys


def test_light_import_does_not_load_vllm():
    code = (
        "import sys, app.engine\n"
        "heavy = [m for m in ('vllm', 'torch', 'transformers') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
