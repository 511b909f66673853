"""A batch line's engine priority, from its batch's deadline.

vLLM's priority scheduler runs the waiting request with the smallest ``priority`` first
(ties: earliest arrival), and online requests that name none have 0. A batch line's priority
is its batch's deadline (``expires_at`` = ``created_at`` + ``completion_window``) in seconds
since :data:`EPOCH`, so:

- earlier deadlines get smaller numbers, whatever the window (a ``1h`` batch created after a
  ``24h`` one still goes first);
- the number depends on the batch alone, not on when a line is sent, so every line of a
  batch carries the same one and two batches compare the same on every replica and engine
  (a "seconds left" value would shrink as a batch runs and let a late line of a far deadline
  overtake an early line of a near one);
- it is always at least 1, behind online traffic at 0 (and behind any small online tiers a
  fleet uses), and it fits a signed 32-bit integer until about 2092 (clamped after that).
"""

from __future__ import annotations

# 2024-01-01T00:00:00Z: keeps the numbers small (about 1e8 in 2027) for engines and logs.
EPOCH = 1_704_067_200
MIN_PRIORITY = 1
MAX_PRIORITY = 2**31 - 1


def deadline_priority(expires_at: int | float) -> int:
    """The priority of every line of a batch that must finish by ``expires_at`` (Unix seconds)."""
    return min(max(int(expires_at) - EPOCH, MIN_PRIORITY), MAX_PRIORITY)
