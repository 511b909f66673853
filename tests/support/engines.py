"""Engine options for tests: every engine runs eager (no torch.compile), which saves about
10 s of start-up per engine and the suite starts about twenty of them."""

from __future__ import annotations

import json
from pathlib import Path

EAGER_FLAG = "--enforce-eager"


def eager_config(path: Path, models: dict[str, dict]) -> Path:
    """Write a `--config` file serving `models` ({name: options}), each engine eager."""
    document = {
        "models": {name: {**options, "engine_args": {"enforce_eager": True}} for name, options in models.items()}
    }
    path.write_text(json.dumps(document))
    return path
