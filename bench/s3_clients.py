"""Which S3 client for the blob store: a 300 MB upload and download through each candidate,
side by side against one SeaweedFS on this machine, each run in its own process so its peak
RSS is its own.

    .venv/bin/python -m bench.s3_clients [--mb 300] [--rounds 3]

Uploads go the way the blob store sends them (bytes arrive 1 MiB at a time, 8 MiB parts, one
part in flight); downloads stream 1 MiB chunks and hash them."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MB = 1024 * 1024
PART = 8 * MB
CLIENTS = ("aiobotocore", "obstore")
BUCKET = "bench-s3-clients"


def _chunks(total: int):
    block = os.urandom(MB)
    for _ in range(total // MB):
        yield block


async def _aiobotocore(op: str, endpoint: str, key: str, total: int, clock: list[float]) -> str:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import get_session

    # As the blob store configures it: no extra CRC of every part, no SHA-256 of the payload
    # for signing over plain HTTP (the bench server is http://).
    config = AioConfig(request_checksum_calculation="when_required", s3={"payload_signing_enabled": False})
    async with get_session().create_client("s3", endpoint_url=endpoint, config=config) as s3:
        clock.append(time.perf_counter())  # client set up: the transfer starts here
        if op == "upload":
            upload_id = (await s3.create_multipart_upload(Bucket=BUCKET, Key=key))["UploadId"]
            parts, buffer = [], bytearray()

            async def send() -> None:
                number = len(parts) + 1
                reply = await s3.upload_part(
                    Bucket=BUCKET, Key=key, UploadId=upload_id, PartNumber=number, Body=bytes(buffer)
                )
                parts.append({"PartNumber": number, "ETag": reply["ETag"]})
                buffer.clear()

            for chunk in _chunks(total):
                buffer += chunk
                if len(buffer) >= PART:
                    await send()
            if buffer:
                await send()
            await s3.complete_multipart_upload(
                Bucket=BUCKET, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
            )
            return ""
        digest = hashlib.sha256()
        reply = await s3.get_object(Bucket=BUCKET, Key=key)
        async with reply["Body"] as body:
            async for chunk in body.iter_chunks(MB):
                digest.update(chunk)
        return digest.hexdigest()


async def _obstore(op: str, endpoint: str, key: str, total: int, clock: list[float]) -> str:
    import obstore
    from obstore.store import S3Store

    store = S3Store(
        BUCKET,
        endpoint=endpoint,
        client_options={"allow_http": True},
        access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        region=os.environ["AWS_DEFAULT_REGION"],
    )
    clock.append(time.perf_counter())
    if op == "upload":
        writer = obstore.open_writer_async(store, key, buffer_size=PART, max_concurrency=1)
        for chunk in _chunks(total):
            await writer.write(chunk)
        await writer.close()
        return ""
    digest = hashlib.sha256()
    reply = await obstore.get_async(store, key)
    async for chunk in reply.stream(min_chunk_size=MB):
        digest.update(chunk)
    return digest.hexdigest()


def child(client: str, op: str, endpoint: str, key: str, total: int) -> None:
    """One operation in this process; prints wall seconds and RSS growth as JSON."""
    from harness.rss import PeakRss

    run = {"aiobotocore": _aiobotocore, "obstore": _obstore}[client]
    # Import the client before the baseline so the figure is what the transfer costs.
    __import__("aiobotocore.session" if client == "aiobotocore" else "obstore.store")
    with PeakRss(os.getpid(), interval=0.01) as rss:
        clock: list[float] = []
        digest = asyncio.run(run(op, endpoint, key, total, clock))
        wall = time.perf_counter() - clock[0]
    print(
        json.dumps({"wall_s": wall, "rss_growth_mb": rss.growth / MB, "peak_rss_mb": rss.peak / MB, "sha256": digest})
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=4, metavar=("CLIENT", "OP", "ENDPOINT", "KEY"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/2026-11-23-s3-client.json"))
    args = parser.parse_args()
    total = args.mb * MB
    if args.child:
        child(*args.child, total)
        return

    from harness import seaweedfs

    with tempfile.TemporaryDirectory() as root:
        server = seaweedfs.SeaweedFS(Path(root)).start()
        try:
            seaweedfs.ensure_bucket(server, BUCKET)
            env = {**os.environ, **server.env(BUCKET)}
            results: dict[str, dict[str, list[dict]]] = {c: {"upload": [], "download": []} for c in CLIENTS}
            for round_no in range(args.rounds):
                order = CLIENTS if round_no % 2 == 0 else CLIENTS[::-1]
                for client in order:
                    key = f"{client}-{round_no}"
                    for op in ("upload", "download"):
                        done = subprocess.run(
                            [
                                sys.executable,
                                "-m",
                                "bench.s3_clients",
                                "--mb",
                                str(args.mb),
                                "--child",
                                client,
                                op,
                                server.endpoint_url,
                                key,
                            ],
                            env=env,
                            capture_output=True,
                            text=True,
                        )
                        if done.returncode == 0:
                            result = json.loads(done.stdout.strip().splitlines()[-1])
                        else:  # a crash is a result too (counted in the table)
                            result = {"returncode": done.returncode, "stderr": done.stderr[-2000:]}
                        results[client][op].append(result)
                        print(client, op, round_no, result, flush=True)
                    seaweedfs.client(server).delete_object(Bucket=BUCKET, Key=key)
        finally:
            server.stop()
    args.out.write_text(json.dumps({"mb": args.mb, "results": results}, indent=1))
    print("\n| client | op | MB/s (median) | RSS growth MB (max) | runs ok |")
    print("|---|---|---|---|---|")
    for client in CLIENTS:
        for op in ("upload", "download"):
            runs = [r for r in results[client][op] if "wall_s" in r]
            speed = statistics.median(args.mb / r["wall_s"] for r in runs) if runs else 0
            growth = max((r["rss_growth_mb"] for r in runs), default=0)
            print(f"| {client} | {op} | {speed:.0f} | {growth:.0f} | {len(runs)}/{len(results[client][op])} |")


if __name__ == "__main__":
    main()
