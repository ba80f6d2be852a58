"""A deadline's lanes: which one an attempt goes through, which one a recorded attempt went
through, and the job's call decorations on the twins (no HTTP: nothing is sent)."""

import threading
import time
from pathlib import Path

import pytest

from maple_assets.binding import job_decorations
from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, Submission
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.registry import build_provider
from maple_engine.send.deadline_lanes import (
    DeadlineLanes,
    attempt_lane,
    deadline_lanes,
    submission_lane,
)
from maple_engine.storage.layout import JobLayout
from maple_engine.storage.storage import Storage

TEAMS = '{"teams": {"catalog": {"openai_project": "proj_cat"}}}'
HOUR = 3600.0


def lanes_of(tmp_path: Path, hours_in: float) -> DeadlineLanes:
    """A 6-hour deadline on OpenAI's batch API, ``hours_in`` hours after the version began."""
    storage = Storage(str(tmp_path))
    storage.write_json(JobLayout("job").version, {"created_at": time.time() - hours_in * HOUR})
    batch = OpenAIBatchProvider(api_key="k", base_url="http://127.0.0.1:1/v1")
    return deadline_lanes(batch, storage, "job", 6 * HOUR, CHAT)


def sub(batch_id: str) -> Submission:
    return Submission("openai", "job", "s00000", 1, batch_id, 1, "", "")


def test_an_attempt_goes_as_a_batch_until_the_deadline_is_due(tmp_path: Path) -> None:
    early = lanes_of(tmp_path, 1.0)
    assert attempt_lane(early, "s00000", 1) is early.batch
    late = lanes_of(tmp_path, 5.6)  # 24 minutes left: within the margin, flex still fits
    assert attempt_lane(late, "s00000", 1) is late.flex


def test_a_stalled_or_marked_shard_goes_late_at_once(tmp_path: Path) -> None:
    lanes = lanes_of(tmp_path, 1.0)
    layout = JobLayout("job")
    lanes.storage.write_json(layout.stall_cancel("s00001", 1), {"batch_id": "b"})
    lanes.storage.write_json(layout.deadline_late("s00002", 1), {"at": 0})
    assert attempt_lane(lanes, "s00001", 1) is lanes.batch  # the stalled attempt itself
    assert attempt_lane(lanes, "s00001", 2) is lanes.flex  # 5 hours left: flex
    assert attempt_lane(lanes, "s00002", 1) is lanes.flex
    assert attempt_lane(lanes, "s00003", 1) is lanes.batch


def test_a_recorded_attempt_is_read_back_from_its_own_lane(tmp_path: Path) -> None:
    lanes = lanes_of(tmp_path, 1.0)
    assert submission_lane(lanes, sub("batch_abc")) is lanes.batch
    assert submission_lane(lanes, sub("rt-job-s00000-1")) is lanes.realtime
    assert submission_lane(lanes, sub("rt-flex-job-s00000-1")) is lanes.flex
    assert submission_lane(lanes, sub("rt-prio-job-s00000-1")) is lanes.priority


def test_the_twins_send_the_jobs_headers_and_tell_its_early_start(tmp_path: Path) -> None:
    batch = OpenAIBatchProvider(api_key="k", team_attribution=TEAMS)
    told = threading.Event()
    decorations = job_decorations(batch, headers={"x-gw": "s"}, team="catalog", sending=told)
    lanes = deadline_lanes(
        batch.decorated(decorations),
        Storage(str(tmp_path)),
        "job",
        6 * HOUR,
        CHAT,
        decorations=decorations,
    )
    for twin in (lanes.realtime, lanes.flex, lanes.priority):
        assert twin is not None
        assert twin.wire.extra_headers == {"x-gw": "s", "OpenAI-Project": "proj_cat"}
        assert twin.wire.decorations.sending is told


def test_a_batch_api_without_real_time_has_no_deadline(tmp_path: Path) -> None:
    batch = build_provider("bedrock", storage_root="s3://b/p")
    with pytest.raises(ConfigError, match="--deadline needs a provider with a real-time API"):
        deadline_lanes(batch, Storage(str(tmp_path)), "job", HOUR, CHAT)  # type: ignore[arg-type]
