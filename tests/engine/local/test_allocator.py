"""Engine processes preload jemalloc on CPU (glibc's malloc lets the worker grow per line)."""

from __future__ import annotations

import ctypes.util
import os

import pytest

from app.engine.errors import ModelConfigError
from app.engine.local.allocator import JEMALLOC_CONF, SETTING, preload_engine_allocator

JEMALLOC = ctypes.util.find_library("jemalloc")


@pytest.fixture
def env(monkeypatch):
    for name in ("LD_PRELOAD", "MALLOC_CONF", SETTING):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_auto_preloads_jemalloc_before_what_is_there(env):
    assert JEMALLOC is not None, "this machine is expected to have libjemalloc2"
    env.setenv("LD_PRELOAD", "/opt/libgomp.so")
    assert preload_engine_allocator() == JEMALLOC
    assert os.environ["LD_PRELOAD"] == f"{JEMALLOC}:/opt/libgomp.so"
    assert os.environ["MALLOC_CONF"] == JEMALLOC_CONF
    # A second engine in the same process adds nothing.
    assert preload_engine_allocator() is None
    assert os.environ["LD_PRELOAD"] == f"{JEMALLOC}:/opt/libgomp.so"


def test_system_and_a_chosen_allocator_are_left_alone(env):
    env.setenv(SETTING, "system")
    assert preload_engine_allocator() is None and "LD_PRELOAD" not in os.environ
    env.setenv(SETTING, "auto")
    env.setenv("LD_PRELOAD", "/usr/lib/libtcmalloc_minimal.so.4")
    env.setenv("MALLOC_CONF", "narenas:1")
    assert preload_engine_allocator() is None
    assert os.environ["LD_PRELOAD"] == "/usr/lib/libtcmalloc_minimal.so.4"
    assert os.environ["MALLOC_CONF"] == "narenas:1"


def test_a_missing_library_path_is_a_config_error(env):
    env.setenv(SETTING, "/nowhere/libjemalloc.so.2")
    with pytest.raises(ModelConfigError, match=SETTING):
        preload_engine_allocator()
