"""Sample the API process with py-spy during the load (it is in the bench extra) and sum where
its time goes: the leaf functions and the files they are in, as shares of the samples."""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from pathlib import Path


class Profiler:
    def __init__(self, pid: int, seconds: int, out: Path) -> None:
        self.out = out
        py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        self.proc = subprocess.Popen(
            [
                py_spy,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(seconds),
                "--rate",
                "50",
                "--nonblocking",
                "--format",
                "raw",
                "--output",
                str(out),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def summary(self, top: int = 12) -> dict:
        try:
            self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return {}
        if not self.out.exists():
            return {}
        leaves: collections.Counter[str] = collections.Counter()
        files: collections.Counter[str] = collections.Counter()
        total = 0
        for line in self.out.read_text(errors="replace").splitlines():
            stack, _, count = line.rpartition(" ")
            if not count.isdigit() or not stack:
                continue
            n = int(count)
            total += n
            leaf = stack.split(";")[-1]
            leaves[leaf] += n
            # "function (path/to/file.py:123)" -> the package-relative file
            path = leaf.rpartition("(")[2].rstrip(")").rsplit(":", 1)[0]
            files[path.split("site-packages/")[-1].split("/wt/uploads/")[-1]] += n
        if not total:
            return {}
        return {
            "samples": total,
            "leaf_functions": [(name, round(100 * n / total, 1)) for name, n in leaves.most_common(top)],
            "files": [(name, round(100 * n / total, 1)) for name, n in files.most_common(top)],
        }
