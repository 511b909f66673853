"""The S3 sweep aborts only the multipart uploads no live write owns and that are older than the
longest a write may take (BATCHD_MAX_WRITE_SECONDS), on the suite's SeaweedFS: another replica's
upload under way is left alone, as is this process's own, and an orphan past the limit goes."""

from __future__ import annotations

import asyncio
import time

import pytest

from app.storage.s3 import PART_BYTES, S3BlobStore, WriteTooLong
from harness.seaweedfs import client
from tests.support.s3 import S3Location

LIMIT = 2.0  # seconds: the longest a write may take here


def test_a_live_upload_is_left_alone_and_an_orphan_past_the_limit_is_aborted(seaweedfs, monkeypatch):
    location = S3Location.fresh(seaweedfs)
    for name, value in location.env().items():
        monkeypatch.setenv(name, value)
    url = f"s3://{location.bucket}/{location.prefix}"
    here = S3BlobStore(url, seaweedfs.endpoint_url, max_write_seconds=LIMIT)
    replica = S3BlobStore(url, seaweedfs.endpoint_url)  # another replica: the default limit (6 h)
    # An upload whose process died: begun, a part sent, never completed nor aborted.
    orphan_key = f"{location.prefix}/tmp/orphan"
    orphan = client(seaweedfs).create_multipart_upload(Bucket=location.bucket, Key=orphan_key)["UploadId"]
    client(seaweedfs).upload_part(
        Bucket=location.bucket, Key=orphan_key, UploadId=orphan, PartNumber=1, Body=b"x" * PART_BYTES
    )

    async def run() -> None:
        try:
            live = here.new_writer("proj", "file-live")
            live.write(b"y" * (PART_BYTES + 10))
            await live.drain()  # its multipart upload is begun, a part on its way
            began = time.time()
            live_key = here.blob_name("proj", "file-live")
            assert sorted(location.contents()[1]) == sorted([orphan_key, live_key])

            # Neither is older than the longest write on the other replica: both are left alone.
            assert await replica.sweep_temp(0) == 0
            assert sorted(location.contents()[1]) == sorted([orphan_key, live_key])

            while time.time() - began <= LIMIT + 1:  # S3 dates an upload to the second
                await asyncio.sleep(0.1)
            # Both are past the limit here: the orphan is aborted, the live write (this process
            # owns it) is not aborted under its writer.
            assert await here.sweep_temp(0) == 1
            assert location.contents()[1] == [live_key]

            # ... which, past the longest a write may take, fails itself and leaves nothing.
            with pytest.raises(WriteTooLong):
                await here.commit(live, "proj", "file-live")
            assert location.contents() == ([], [])
        finally:
            await here.close()
            await replica.close()

    asyncio.run(run())
