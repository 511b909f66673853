"""The S3 writer's parts in flight (app/storage/s3.py), against a fake client whose part uploads
end when the test lets them: no more than PARTS_IN_FLIGHT go up at once, the upload is completed
with every part in number order (whatever order they ended in), the hash is the bytes', a writer
fills no more buffers than one and those in flight, a part
that failed fails the commit, and a discard waits for the parts going up before its abort."""

from __future__ import annotations

import asyncio
import hashlib
import os

import pytest

from app.storage.s3 import PART_BYTES, PARTS_IN_FLIGHT, S3BlobStore


class _FakeS3:
    def __init__(self) -> None:
        self.gates: dict[int, asyncio.Event] = {}
        self.parts: dict[int, bytes] = {}
        self.bodies: set[int] = set()  # the distinct buffers parts went up in
        self.running: set[int] = set()
        self.most = 0
        self.completed: list[dict] | None = None
        self.calls: list[str] = []
        self.fail_part: int | None = None

    def gate(self, number: int) -> asyncio.Event:
        return self.gates.setdefault(number, asyncio.Event())

    async def create_multipart_upload(self, **kwargs):
        self.calls.append("create")
        return {"UploadId": "u1"}

    async def upload_part(self, *, PartNumber, Body, **kwargs):
        self.running.add(PartNumber)
        self.most = max(self.most, len(self.running))
        try:
            await self.gate(PartNumber).wait()
        finally:
            self.running.discard(PartNumber)
        if PartNumber == self.fail_part:
            raise OSError("part refused")
        self.parts[PartNumber] = Body.read()  # what aiohttp sends: the body from where it stands
        self.bodies.add(id(Body))
        self.calls.append(f"part {PartNumber}")
        return {"ETag": f"e{PartNumber}"}

    async def complete_multipart_upload(self, *, MultipartUpload, **kwargs):
        self.completed = MultipartUpload["Parts"]
        self.calls.append("complete")

    async def abort_multipart_upload(self, **kwargs):
        self.calls.append("abort")


def _store(fake: _FakeS3) -> S3BlobStore:
    store = S3BlobStore("s3://bucket/prefix", "http://s3.invalid")
    store._client = fake  # no network: the fake stands in for aiobotocore's client
    return store


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def _until(condition) -> None:
    """Let the loop run (a part is hashed in a thread) until `condition()` holds."""
    for _ in range(5000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("never came to pass")


def test_parts_go_up_side_by_side_bounded_and_complete_in_order():
    data = os.urandom(5 * PART_BYTES + 1000)

    async def run() -> None:
        fake = _FakeS3()
        store = _store(fake)
        writer = store.new_writer("proj", "file-1")
        filling = asyncio.create_task(_fill(writer, data))
        # Two parts going up; the third is hashed and waits for a free place, and the caller too.
        await _until(lambda: fake.running == set(range(1, PARTS_IN_FLIGHT + 1)))
        assert not filling.done()
        for number in (2, 1, 4, 3, 5):  # the later part ends first
            fake.gate(number).set()
            await _until(lambda number=number: number in fake.parts)
        await filling
        fake.gate(6).set()  # the short last part, sent at commit
        await store.commit(writer, "proj", "file-1")
        assert fake.most == PARTS_IN_FLIGHT
        assert fake.completed == [{"PartNumber": n, "ETag": f"e{n}"} for n in range(1, 7)]
        assert b"".join(fake.parts[n] for n in range(1, 7)) == data
        assert writer.size == len(data) and writer.sha256 == hashlib.sha256(data).hexdigest()
        # A part's buffer, once up, is filled again: one filling and those in flight, no more.
        assert len(fake.bodies) <= 1 + PARTS_IN_FLIGHT

    asyncio.run(run())


async def _fill(writer, data: bytes) -> None:
    for start in range(0, len(data), 1 << 20):
        writer.write(data[start : start + (1 << 20)])
        await writer.drain()


def test_the_hash_counts_bytes_not_yet_sent():
    async def run() -> None:
        writer = _store(_FakeS3()).new_writer("proj", "file-1")
        writer.write(b"abc")
        assert writer.sha256 == hashlib.sha256(b"abc").hexdigest()

    asyncio.run(run())


def test_a_failed_part_fails_the_commit_and_the_upload_is_aborted():
    async def run() -> None:
        fake = _FakeS3()
        fake.fail_part = 1
        for number in range(1, 4):
            fake.gate(number).set()
        store = _store(fake)
        writer = store.new_writer("proj", "file-1")
        await _fill(writer, os.urandom(2 * PART_BYTES + 10))
        with pytest.raises(OSError, match="part refused"):
            await store.commit(writer, "proj", "file-1")
        assert fake.completed is None and fake.calls[-1] == "abort"

    asyncio.run(run())


def test_a_discard_waits_for_the_parts_going_up_then_aborts():
    async def run() -> None:
        fake = _FakeS3()
        writer = _store(fake).new_writer("proj", "file-1")
        await _fill(writer, os.urandom(PART_BYTES + 10))
        await _until(lambda: fake.running == {1})
        discarding = asyncio.create_task(writer.discard())
        await _settle()
        assert not discarding.done() and "abort" not in fake.calls
        fake.gate(1).set()
        await discarding
        assert fake.calls == ["create", "part 1", "abort"]

    asyncio.run(run())


def test_a_small_blob_s_hash_holds_after_its_commit():
    """A blob smaller than a part goes up in one PUT at commit; its hash, read after the commit
    (finalize reads it so), is still the bytes'."""

    class _Puts(_FakeS3):
        async def put_object(self, *, Body, **kwargs):
            self.parts[0] = Body.read()

    async def run() -> None:
        fake = _Puts()
        store = _store(fake)
        writer = store.new_writer("proj", "file-1")
        writer.write(b"abc")
        await store.commit(writer, "proj", "file-1")
        assert fake.parts[0] == b"abc"
        assert writer.sha256 == hashlib.sha256(b"abc").hexdigest()

    asyncio.run(run())
