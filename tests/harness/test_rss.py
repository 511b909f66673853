"""The one RSS sampler: its growth is the main process's peak over the sample taken at start,
so memory a process holds before the sampler starts does not count."""

from __future__ import annotations

import subprocess
import sys
import time

from harness.rss import MB, TreeRss

CHILD = """
import sys, time
held = bytearray(40 * 1024 * 1024)
print("held", flush=True)
sys.stdin.readline()
more = bytearray(60 * 1024 * 1024)
print("more", flush=True)
sys.stdin.readline()
"""


def test_growth_is_the_main_process_peak_over_its_first_sample():
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "held\n"
        with TreeRss(child.pid, interval=0.01) as rss:
            child.stdin.write("\n")
            child.stdin.flush()
            assert child.stdout.readline() == "more\n"
            time.sleep(0.1)
        assert 50 * MB <= rss.growth <= 70 * MB
        assert rss.peak_total >= 100 * MB
    finally:
        child.kill()
        child.wait()
