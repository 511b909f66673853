"""Building a model folder so that a crash never leaves a half-written one and concurrent
builders agree on one result."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def build_folder(dest: Path, write: Callable[[Path], None]) -> Path:
    """Unless ``dest`` exists, let ``write`` fill a temporary folder beside it and rename that
    into place; return ``dest``."""
    dest = Path(dest)
    if dest.is_dir():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        write(tmp)
        # mkdtemp creates the folder private; a model is not a secret.
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, dest)
        except OSError:
            # Another builder won the race; its output is identical.
            if not dest.is_dir():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return dest
