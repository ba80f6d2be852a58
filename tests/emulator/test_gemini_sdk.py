"""The official google-genai client against the emulator's Gemini API, unchanged."""

import hashlib
import io
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest
from google import genai
from google.genai import errors, types

from emulator.server import EmulatorServer
from emulator.testing import MakeEmulator
from tests.emulator.test_shutdown import free_port

MODEL = "gemini-2.5-flash"
DONE = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED"}


def client_for(server: EmulatorServer) -> genai.Client:
    return genai.Client(api_key="test-key", http_options={"base_url": server.url})


@pytest.fixture
def gemini(emulator: EmulatorServer) -> Iterator[genai.Client]:
    yield client_for(emulator)


def request(text: str) -> dict[str, object]:
    return {"contents": [{"role": "user", "parts": [{"text": text}]}]}


def wait(client: genai.Client, name: str) -> types.BatchJob:
    deadline = time.monotonic() + 10
    while True:
        job = client.batches.get(name=name)
        if job.state is not None and job.state.value in DONE:
            return job
        assert time.monotonic() < deadline, job.state
        time.sleep(0.05)


def test_inline_batch_round_trip(gemini: genai.Client) -> None:
    inline = [
        {"contents": [{"parts": [{"text": "Tell me a one-sentence joke."}], "role": "user"}]},
        {"contents": [{"parts": [{"text": "Why is the sky blue?"}], "role": "user"}]},
    ]
    job = gemini.batches.create(model=MODEL, src=inline, config={"display_name": "inline-1"})
    assert job.name is not None and job.name.startswith("batches/")
    assert job.display_name == "inline-1"
    assert job.state is not None and job.state.value in {"JOB_STATE_PENDING", "JOB_STATE_RUNNING"}
    done = wait(gemini, job.name)
    assert done.state is not None and done.state.value == "JOB_STATE_SUCCEEDED"
    assert done.dest is not None and done.dest.inlined_responses is not None
    texts = [r.response.text for r in done.dest.inlined_responses if r.response is not None]
    assert texts == ["echo: Tell me a one-sentence joke.", "echo: Why is the sky blue?"]
    usage = done.dest.inlined_responses[0].response.usage_metadata  # type: ignore[union-attr]
    assert usage is not None and usage.prompt_token_count and usage.candidates_token_count


def test_file_batch_upload_list_and_download(gemini: genai.Client) -> None:
    lines = [{"key": f"request-{i}", "request": request(f"item {i}")} for i in range(3)]
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    uploaded = gemini.files.upload(
        file=io.BytesIO(data),
        config=types.UploadFileConfig(display_name="in", mime_type="jsonl"),
    )
    assert uploaded.name is not None and uploaded.name.startswith("files/")
    assert uploaded.size_bytes == len(data)
    job = gemini.batches.create(model=MODEL, src=uploaded.name, config={"display_name": "file-1"})
    assert job.name is not None
    listed = [j.name for j in gemini.batches.list(config={"page_size": 10})]
    assert job.name in listed
    done = wait(gemini, job.name)
    assert done.dest is not None and done.dest.file_name is not None
    content = gemini.files.download(file=done.dest.file_name)
    out = [orjson.loads(line) for line in content.splitlines()]
    assert [o["key"] for o in out] == ["request-0", "request-1", "request-2"]
    text = out[1]["response"]["candidates"][0]["content"]["parts"][0]["text"]
    assert text == "echo: item 1"


def test_cancel_then_cancelled(make_emulator: MakeEmulator) -> None:
    with make_emulator(batch_seconds=5) as server:
        client = client_for(server)
        job = client.batches.create(model=MODEL, src=[request("a"), request("b")])
        assert job.name is not None
        client.batches.cancel(name=job.name)
        done = client.batches.get(name=job.name)
        while done.state is not None and done.state.value not in DONE:
            time.sleep(0.05)
            done = client.batches.get(name=job.name)
        assert done.state is not None and done.state.value == "JOB_STATE_CANCELLED"


def test_faults_come_back_as_status_errors(make_emulator: MakeEmulator) -> None:
    with make_emulator(fail={"server_error": 1.0}, control_fail=0.0) as server:
        client = client_for(server)
        job = client.batches.create(model=MODEL, src=[request("a")])
        assert job.name is not None
        done = wait(client, job.name)
        assert done.dest is not None and done.dest.inlined_responses is not None
        error = done.dest.inlined_responses[0].error
        assert error is not None and error.code == 13  # google.rpc.Code.INTERNAL
        assert server.stats()["requests_billed"] == 0


def test_generate_content_and_missing_key(gemini: genai.Client, emulator: EmulatorServer) -> None:
    reply = gemini.models.generate_content(model=MODEL, contents="hello there")
    assert reply.text == "echo: hello there"
    import httpx

    response = httpx.get(f"{emulator.url}/v1beta/batches", timeout=5)
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"
    with pytest.raises(errors.ClientError):
        gemini.batches.get(name="batches/nope")


def test_unreadable_input_file_fails_the_batch(gemini: genai.Client) -> None:
    data = b'{"key": "a", "request": {"contents": []}}\nnot json\n'
    uploaded = gemini.files.upload(
        file=io.BytesIO(data), config=types.UploadFileConfig(mime_type="jsonl")
    )
    assert uploaded.name is not None
    job = gemini.batches.create(model=MODEL, src=uploaded.name)
    assert job.name is not None
    done = wait(gemini, job.name)
    assert done.state is not None and done.state.value == "JOB_STATE_FAILED"


def test_inline_and_file_size_limits(make_emulator: MakeEmulator) -> None:
    with make_emulator(gemini_max_inline_bytes=300, gemini_max_file_bytes=50) as server:
        client = client_for(server)
        with pytest.raises(errors.ClientError) as inline:
            client.batches.create(model=MODEL, src=[request("x" * 400)])
        assert inline.value.code == 400 and "exceeds the limit" in str(inline.value.message)
        with pytest.raises(errors.ClientError) as big:
            client.files.upload(
                file=io.BytesIO(b"y" * 100), config=types.UploadFileConfig(mime_type="jsonl")
            )
        assert big.value.code == 400


EMBED_MODEL = "gemini-embedding-001"


@pytest.mark.filterwarnings("ignore::google.genai._common.ExperimentalWarning")  # create_embeddings
def test_embed_content_agrees_with_an_embedding_batch(emulator: EmulatorServer) -> None:
    gemini = client_for(emulator)
    texts = ["red cotton shirt", "blue denim jacket", "red cotton shirt"]
    live = gemini.models.embed_content(
        model=EMBED_MODEL, contents=texts, config={"output_dimensionality": 8}
    )
    assert live.embeddings is not None and len(live.embeddings) == 3
    vectors = [e.values for e in live.embeddings]
    assert all(v is not None and len(v) == 8 for v in vectors)
    assert vectors[0] == vectors[2] and vectors[0] != vectors[1]
    assert abs(sum(x * x for x in vectors[0] or []) - 1.0) < 1e-5  # unit length
    assert emulator.stats()["requests_billed"] == 3  # one per text
    job = gemini.batches.create_embeddings(
        model=EMBED_MODEL,
        src={"inlined_requests": {"contents": texts[:2], "config": {"output_dimensionality": 8}}},
        config={"display_name": "embed-1"},
    )
    assert job.name is not None
    done = wait(gemini, job.name)
    assert done.state is not None and done.state.value == "JOB_STATE_SUCCEEDED"
    assert done.dest is not None and done.dest.inlined_embed_content_responses is not None
    batch = [r.response.embedding.values for r in done.dest.inlined_embed_content_responses]  # type: ignore[union-attr]
    assert batch == vectors[:2]
    assert emulator.stats()["requests_billed"] == 5


@pytest.mark.filterwarnings("ignore::google.genai._common.ExperimentalWarning")  # create_embeddings
def test_an_embedding_batch_from_a_file_and_its_limits(emulator: EmulatorServer) -> None:
    gemini = client_for(emulator)
    lines = [
        {"key": f"k{i}", "request": {"content": {"parts": [{"text": f"item {i}"}]},
                                      "outputDimensionality": 4}}
        for i in range(3)
    ]  # fmt: skip
    data = b"".join(orjson.dumps(line) + b"\n" for line in lines)
    uploaded = gemini.files.upload(
        file=io.BytesIO(data), config=types.UploadFileConfig(display_name="in", mime_type="jsonl")
    )
    assert uploaded.name is not None
    job = gemini.batches.create_embeddings(model=EMBED_MODEL, src={"file_name": uploaded.name})
    assert job.name is not None
    done = wait(gemini, job.name)
    assert done.dest is not None and done.dest.file_name is not None
    out = [
        orjson.loads(line) for line in gemini.files.download(file=done.dest.file_name).splitlines()
    ]
    live = gemini.models.embed_content(
        model=EMBED_MODEL, contents="item 1", config={"output_dimensionality": 4}
    )
    assert live.embeddings is not None
    assert [o["key"] for o in out] == ["k0", "k1", "k2"]
    assert out[1]["response"]["embedding"]["values"] == live.embeddings[0].values
    assert out[1]["response"]["usageMetadata"]["promptTokenCount"] == 2
    with pytest.raises(errors.ClientError, match="at most 100 requests"):
        gemini.models.embed_content(model=EMBED_MODEL, contents=[f"t{i}" for i in range(101)])
    with pytest.raises(errors.ClientError, match="output_dimensionality"):
        gemini.models.embed_content(
            model=EMBED_MODEL, contents="x", config={"output_dimensionality": 4000}
        )


def test_a_file_part_takes_a_files_api_upload_by_its_uri(gemini: genai.Client) -> None:
    """A PDF uploaded by the Files API goes in ``generateContent`` as a ``fileData`` part by
    its ``uri``: the reply names its bytes and its page is billed; a Files API URI naming no
    upload (never made, or deleted) is refused."""
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
    uploaded = gemini.files.upload(
        file=io.BytesIO(pdf), config=types.UploadFileConfig(mime_type="application/pdf")
    )
    assert uploaded.uri is not None and uploaded.mime_type == "application/pdf"
    part = types.Part.from_uri(file_uri=uploaded.uri, mime_type="application/pdf")
    reply = gemini.models.generate_content(model=MODEL, contents=["Summarise", part])
    assert reply.text is not None
    assert reply.text.endswith(f"[file pdf {hashlib.sha256(pdf).hexdigest()[:12]}]")
    assert reply.usage_metadata is not None
    assert (reply.usage_metadata.prompt_token_count or 0) >= 258  # the page
    other = types.Part.from_uri(file_uri=uploaded.uri + "-gone", mime_type="application/pdf")
    with pytest.raises(
        errors.ClientError, match=r"403 PERMISSION_DENIED.*access the File .* or it may not exist"
    ):
        gemini.models.generate_content(model=MODEL, contents=["Summarise", other])


def test_a_file_named_at_create_is_got_by_that_name_until_it_expires(
    make_emulator: MakeEmulator,
) -> None:
    """A ``File`` may be named at create (up to 40 lowercase letters, digits or dashes after
    ``files/``): got by that name, refused a second create while it lives, and deleted at its
    ``expirationTime`` (the emulator keeps it 2 s here, Google 48 hours)."""
    pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
    with make_emulator(gemini_file_retention_s=2) as server:
        gemini = client_for(server)
        config = types.UploadFileConfig(name="files/maple-abc", mime_type="application/pdf")
        made = gemini.files.upload(file=io.BytesIO(pdf), config=config)
        assert made.name == "files/maple-abc" and made.expiration_time is not None
        assert gemini.files.get(name="files/maple-abc").uri == made.uri
        with pytest.raises(errors.ClientError, match="already exists"):
            gemini.files.upload(file=io.BytesIO(pdf), config=config)
        bad = types.UploadFileConfig(name="files/-Maple", mime_type="application/pdf")
        with pytest.raises(errors.ClientError, match="Invalid file name"):
            gemini.files.upload(file=io.BytesIO(pdf), config=bad)
        time.sleep(2.2)
        with pytest.raises(errors.ClientError, match="not found"):
            gemini.files.get(name="files/maple-abc")
        part = types.Part.from_uri(file_uri=str(made.uri), mime_type="application/pdf")
        with pytest.raises(errors.ClientError, match=r"403 PERMISSION_DENIED.*or it may not exist"):
            gemini.models.generate_content(model=MODEL, contents=["Summarise", part])


def test_maple_emulator_keeps_uploaded_files_for_gemini_file_retention(tmp_path: Path) -> None:
    """``maple emulator --gemini-file-retention 1``: an upload is deleted after a second, and a
    request naming it is answered as Google answers one naming a deleted file."""
    port = free_port()
    command = [sys.executable, "-m", "maple_assets.cli", "emulator", "--port", str(port),
               "--gemini-file-retention", "1"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(f"{url}/_emulator/stats", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.1)
        gemini = genai.Client(api_key="test-key", http_options={"base_url": url})
        pdf = b"%PDF-1.4\n1 0 obj << /Type /Page >> endobj\n%%EOF\n"
        made = gemini.files.upload(file=io.BytesIO(pdf), config={"mime_type": "application/pdf"})
        assert made.expiration_time is not None and made.create_time is not None
        assert (made.expiration_time - made.create_time).total_seconds() == pytest.approx(1, 0.1)
        time.sleep(1.2)
        part = types.Part.from_uri(file_uri=str(made.uri), mime_type="application/pdf")
        with pytest.raises(errors.ClientError, match=r"403 PERMISSION_DENIED"):
            gemini.models.generate_content(model=MODEL, contents=["Summarise", part])
    finally:
        proc.kill()
        proc.wait(timeout=20)
