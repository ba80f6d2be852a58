"""Result files are streamed to disk (``maple_engine.providers.http.download``), never held whole
in memory,
with the retry policy of every other GET: a 500 mid-way starts the file over."""

import tempfile

import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_engine.errors import ProviderError
from maple_engine.providers.http import download, make_client


@pytest.mark.slow  # ~10-16 s: retries with backoff
def test_a_download_retried_after_500s_writes_the_file_once_whole() -> None:
    body = b"".join(b'{"custom_id":"r%d","n":%d}\n' % (i, i) for i in range(20_000))
    # a quarter of the calls draw a 500: a download gives up only on 8 of them in a row
    with EmulatorServer(EmulatorConfig(control_fail=0.25, seed=5)) as server:
        client = make_client(f"{server.url}/v1", {"Authorization": "Bearer k"}, 30.0)
        with client:
            for _ in range(20):  # the upload may draw a 500 too
                created = client.post(
                    "/files", files={"file": ("in.jsonl", body)}, data={"purpose": "batch"}
                )
                if created.status_code == 200:
                    break
            file_id = created.json()["id"]
            failed_before = server.stats()["control_500"]
            for _ in range(30):  # some of 30 surely draw a 500 (all pass: 0.75**30)
                with tempfile.NamedTemporaryFile() as spool:
                    spool.write(b"left over from an earlier try")
                    download(client, f"/files/{file_id}/content", spool, what="download file")
                    spool.seek(0)
                    assert spool.read() == body
            assert server.stats()["control_500"] > failed_before  # some tries failed


def test_a_missing_file_names_the_call() -> None:
    with EmulatorServer(EmulatorConfig(control_fail=0.0)) as server:
        client = make_client(f"{server.url}/v1", {"Authorization": "Bearer k"}, 30.0)
        with (
            client,
            tempfile.TemporaryFile() as spool,
            pytest.raises(ProviderError, match="download output_file_id of batch b1: GET"),
        ):
            download(
                client,
                "/files/file-nope/content",
                spool,
                what="download output_file_id of batch b1",
            )
