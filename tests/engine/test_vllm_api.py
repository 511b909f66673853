"""vLLM is imported in one module of app/ (app/engine/vllm_api.py), so a vLLM upgrade shows
what moved in one place."""

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
VLLM_API = APP / "engine" / "vllm_api.py"


def _vllm_imports(path: Path) -> list[int]:
    """The lines of `path` that import vLLM (at module level or inside a function)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules = [node.module or ""]
        else:
            continue
        if any(module == "vllm" or module.startswith("vllm.") for module in modules):
            lines.append(node.lineno)
    return lines


def test_only_vllm_api_imports_vllm():
    offenders = {
        str(path.relative_to(APP.parent)): lines
        for path in sorted(APP.rglob("*.py"))
        if path != VLLM_API and (lines := _vllm_imports(path))
    }
    assert offenders == {}, "import these names through app.engine.vllm_api"


def test_vllm_api_imports_vllm():
    # The guard above must see the imports it forbids elsewhere.
    assert len(_vllm_imports(VLLM_API)) > 10
