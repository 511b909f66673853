"""The torch add-ons built for another torch are hidden (app/core/torch_addons.py)."""

from __future__ import annotations

import importlib.util
import sys

from app.core import torch_addons
from app.core.torch_addons import mismatched


def test_a_cuda_build_beside_the_cpu_torch_is_mismatched():
    assert mismatched("2.13.0+cpu", "0.28.0", ["numpy", "torch (==2.13.0)"])
    assert mismatched("2.13.0+cpu", "0.17.0", [])  # torchcodec from PyPI: no CPU build label


def test_matching_builds_are_kept():
    assert not mismatched("2.13.0+cpu", "0.28.0+cpu", ["torch==2.13.0"])
    assert not mismatched("2.13.0", "0.28.0", ["numpy", "torch (==2.13.0)"])  # a GPU install
    assert not mismatched("2.13.0", "2.13.0", ["torch"])


def test_another_torch_release_is_mismatched():
    assert mismatched("2.13.0", "0.27.0", ["torch==2.12.0"])
    assert not mismatched("2.13.0", "0.28.0", ['torch==2.12.0; extra == "old"'])


def test_hidden_addons_look_absent(monkeypatch):
    class Dist:
        version = "0.28.0"
        requires = ["torch (==2.13.0)"]

    def distribution(name):
        if name == "torchvision":
            return Dist()
        raise torch_addons.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(torch_addons.metadata, "version", lambda name: "2.13.0+cpu")
    monkeypatch.setattr(torch_addons.metadata, "distribution", distribution)
    monkeypatch.delitem(sys.modules, "torchvision", raising=False)
    assert torch_addons.hide_mismatched_torch_addons() == ["torchvision"]
    assert importlib.util.find_spec("torchvision") is None
    monkeypatch.delitem(sys.modules, "torchvision")
