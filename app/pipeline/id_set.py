"""A set of custom_ids at about 24 bytes each, whatever their length.

Validation must find a repeated custom_id in a batch of a million lines; a Python set of the
strings held ~100 MB for that (W9). This keeps a 96-bit fingerprint of each id instead (its
64-bit str hash and its CRC-32) in two flat arrays with open addressing. Two different ids
share a fingerprint with odds of about n^2 / 2^97: 1e-17 for a million ids.

Ids come one at a time (`add`) or a chunk's at once (`add_all`: numpy over the fingerprints,
so a million-line file spends no per-line Python here); both fill the same table."""

from __future__ import annotations

import zlib
from array import array
from collections.abc import Sequence

import numpy as np

_EMPTY = 0
# A walk or a placement goes on id by id once this few ids are left: the rounds of array calls
# last as long as the longest probe of the batch, and a 128 KiB block's ~1,200 ids spent more
# in those last rounds than in all the others (0.8 us an id against 0.3 for 9,500 at once).
_STRAGGLERS = 32


def _fingerprint(custom_id: str) -> tuple[int, int]:
    # 0 marks an empty slot; a hash of 0 shares its slot key with 1 (the CRC still tells them apart).
    return (hash(custom_id) & 0xFFFF_FFFF_FFFF_FFFF) or 1, zlib.crc32(custom_id.encode())


def _fingerprints(custom_ids: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """`_fingerprint` of every id, as two arrays (map runs the per-id calls in C)."""
    n = len(custom_ids)
    hashes = np.fromiter(map(hash, custom_ids), np.int64, n).view(np.uint64)
    hashes[hashes == _EMPTY] = 1
    crcs = np.fromiter(map(zlib.crc32, map(str.encode, custom_ids)), np.uint32, n)
    return hashes, crcs


class CustomIdSet:
    def __init__(self, capacity: int = 1024) -> None:
        self._hashes = array("Q", bytes(8 * capacity))
        self._crcs = array("I", bytes(4 * capacity))
        self._mask = capacity - 1
        self._count = 0

    def add(self, custom_id: str) -> bool:
        """Add `custom_id`; False if it was there already."""
        h, crc = _fingerprint(custom_id)
        if not self._insert(h, crc):
            return False
        self._count += 1
        if 2 * self._count > len(self._hashes):
            self._grow(2 * len(self._hashes))
        return True

    def add_all(self, custom_ids: Sequence[str]) -> bool:
        """Add every id, or none: False (and nothing added) if one is there already or two of
        them are the same, so the caller can go through them one by one for the error."""
        if not custom_ids or len(set(custom_ids)) < len(custom_ids):  # (a repeat within them: False)
            return not custom_ids
        size = len(self._hashes)
        while 2 * (self._count + len(custom_ids)) > size:
            size *= 2
        if size != len(self._hashes):  # first, so the walk's slots are the table's
            self._grow(size)
        hashes, crcs = _fingerprints(custom_ids)
        free = self._walk(hashes, crcs)
        if free is None:
            return False
        self._place(hashes, crcs, free)
        self._count += len(custom_ids)
        return True

    def __len__(self) -> int:
        return self._count

    def _insert(self, h: int, crc: int) -> bool:
        hashes, crcs, mask = self._hashes, self._crcs, self._mask
        slot = h & mask
        while hashes[slot] != _EMPTY:
            if hashes[slot] == h and crcs[slot] == crc:
                return False
            slot = (slot + 1) & mask
        hashes[slot], crcs[slot] = h, crc
        return True

    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """The table as numpy views (no copy: writes go to the arrays `add` probes)."""
        return np.frombuffer(self._hashes, np.uint64), np.frombuffer(self._crcs, np.uint32)

    def _home(self, hashes: np.ndarray) -> np.ndarray:
        return (hashes & np.uint64(self._mask)).astype(np.int64)

    def _walk(self, hashes: np.ndarray, crcs: np.ndarray) -> np.ndarray | None:
        """Each fingerprint's first empty slot on its probe sequence, or None if the table holds
        one of them: the ids walk in step, one slot a round, until they meet themselves or a gap."""
        table_h, table_c = self._tables()
        slots = self._home(hashes)
        pending = np.arange(len(hashes))
        while pending.size > _STRAGGLERS:
            seen_h = table_h[slots[pending]]
            # The CRCs only where the hash matches: a slot read from two arrays is two cache
            # misses, the larger part of an id's cost in W9 (the table is ~24 MB).
            alike = pending[seen_h == hashes[pending]]
            if alike.size and np.any(table_c[slots[alike]] == crcs[alike]):
                return None
            pending = pending[seen_h != _EMPTY]
            slots[pending] = (slots[pending] + 1) & self._mask
        table_hashes, table_crcs, mask = self._hashes, self._crcs, self._mask
        for i in pending.tolist():  # the last few walk alone, not a round of array calls each slot
            h, crc, slot = int(hashes[i]), int(crcs[i]), int(slots[i])
            while (seen := table_hashes[slot]) != _EMPTY:
                if seen == h and table_crcs[slot] == crc:
                    return None
                slot = (slot + 1) & mask
            slots[i] = slot
        return slots

    def _place(self, hashes: np.ndarray, crcs: np.ndarray, slots: np.ndarray) -> None:
        """Put fingerprints the table lacks (no two alike) into their first free slot of linear
        probing, from `slots` on (every slot before them on their probe sequence is taken). Ids
        that reach the same free slot in a round are all written there and read back: the one
        that holds it stays, the rest probe on (no sort a round, as np.unique took)."""
        table_h, table_c = self._tables()
        pending = np.arange(len(hashes))
        while pending.size > _STRAGGLERS:
            at = slots[pending]
            free = table_h[at] == _EMPTY
            trying, where = pending[free], at[free]
            table_h[where], table_c[where] = hashes[trying], crcs[trying]
            placed = np.zeros(len(hashes), bool)
            placed[trying] = (table_h[where] == hashes[trying]) & (table_c[where] == crcs[trying])
            pending = pending[~placed[pending]]
            slots[pending] = (slots[pending] + 1) & self._mask
        table_hashes, table_crcs, mask = self._hashes, self._crcs, self._mask
        for i in pending.tolist():
            slot = int(slots[i])
            while table_hashes[slot] != _EMPTY:
                slot = (slot + 1) & mask
            table_hashes[slot], table_crcs[slot] = int(hashes[i]), int(crcs[i])

    def _grow(self, size: int) -> None:
        old_h, old_c = self._tables()
        used = old_h != _EMPTY
        kept_h, kept_c = old_h[used].copy(), old_c[used].copy()
        del old_h, old_c  # views pin the old arrays' buffers
        self._hashes, self._crcs, self._mask = array("Q", bytes(8 * size)), array("I", bytes(4 * size)), size - 1
        self._place(kept_h, kept_c, self._home(kept_h))
