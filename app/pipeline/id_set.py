"""A set of custom_ids at about 24 bytes each, whatever their length.

Validation must find a repeated custom_id in a batch of a million lines; a Python set of the
strings held ~100 MB for that (W9). This keeps a 96-bit fingerprint of each id instead (its
64-bit str hash and its CRC-32) in two flat arrays with open addressing. Two different ids
share a fingerprint with odds of about n^2 / 2^97: 1e-17 for a million ids."""

from __future__ import annotations

import zlib
from array import array

_EMPTY = 0


def _fingerprint(custom_id: str) -> tuple[int, int]:
    # 0 marks an empty slot; a hash of 0 shares its slot key with 1 (the CRC still tells them apart).
    return (hash(custom_id) & 0xFFFF_FFFF_FFFF_FFFF) or 1, zlib.crc32(custom_id.encode())


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
            self._grow()
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

    def _grow(self) -> None:
        old = zip(self._hashes, self._crcs, strict=True)
        size = 2 * len(self._hashes)
        self._hashes, self._crcs, self._mask = array("Q", bytes(8 * size)), array("I", bytes(4 * size)), size - 1
        for h, crc in old:
            if h != _EMPTY:
                self._insert(h, crc)
