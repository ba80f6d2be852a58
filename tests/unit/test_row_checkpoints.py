"""The real-time checkpoints' log on a local root: which sends a killed run made whose answers
it never recorded (billed by the provider, sent again by the rerun, booked by the ledger)."""

import asyncio
from pathlib import Path

from maple_engine.providers.base import failed_row
from maple_engine.send.checkpoints import RowCheckpoints
from maple_engine.storage.storage import Storage

PREFIX = "job/state/s00000/rt-1"


def row(custom_id: str) -> dict[str, object]:
    return {"custom_id": custom_id, "status": "succeeded", "billed": True, "input_tokens": 3}


def die(run: RowCheckpoints) -> None:
    """What a SIGKILL leaves: the log as written, its file closed by the kernel."""
    assert run._wal is not None
    run._wal.close()


def store(root: Path, every_rows: int = 200) -> RowCheckpoints:
    return RowCheckpoints(
        Storage(str(root)), PREFIX, every_rows=every_rows, every_s=3600, logged_rows=every_rows
    )


def test_a_send_the_process_died_during_is_lost_and_answered_ones_are_not(
    tmp_path: Path,
) -> None:
    first = store(tmp_path)
    first.open()
    first.sending(["a"])
    first.add(row("a"))  # answered and recorded
    first.sending(["b"])
    first.unbilled(["b"])  # answered with an error: nothing billed
    first.sending(["c", "d"])  # one request of two rows (embeddings), in flight at the kill
    first.sending(["e"])
    die(first)
    rerun = store(tmp_path)
    done = rerun.open()
    assert done["custom_id"].to_list() == ["a"]
    assert rerun.lost() == {"c": 1, "d": 1, "e": 1}
    assert store(tmp_path).lost() == rerun.lost()  # kept, read again by the collect step
    rerun.close()


def test_sends_in_flight_across_a_flush_are_told_again_in_the_new_log(tmp_path: Path) -> None:
    first = store(tmp_path, every_rows=2)
    first.open()
    first.sending(["slow"])
    for custom_id in ("x", "y"):  # two rows: a chunk is written and the log replaced
        first.sending([custom_id])
        first.add(row(custom_id))
    assert len(list(tmp_path.glob(f"{PREFIX}/chunk-*.parquet"))) == 1
    die(first)
    rerun = store(tmp_path)
    rerun.open()
    assert rerun.lost() == {"slow": 1}
    rerun.close()


def test_a_send_resent_after_a_kill_counts_each_lost_send(tmp_path: Path) -> None:
    for _ in range(2):  # killed twice while the same row was in flight
        run = store(tmp_path)
        run.open()
        run.sending(["r"])
        die(run)
    last = store(tmp_path)
    last.open()
    last.sending(["r"])
    last.add(row("r"))
    last.close()
    assert store(tmp_path).lost() == {"r": 2}
    assert store(tmp_path).load()["custom_id"].to_list() == ["r"]


def test_answers_dropped_unrecorded_at_close_are_kept_as_lost(tmp_path: Path) -> None:
    """A stop or a job error drops rows held back for first contact: billed, not recorded."""
    run = store(tmp_path)
    run.open()
    run.sending(["held"])
    run.close()
    assert store(tmp_path).lost() == {"held": 1}
    assert not list(tmp_path.glob(f"{PREFIX}/wal-*"))


def test_a_rows_resendable_mark_is_kept_by_the_log_and_the_chunks(tmp_path: Path) -> None:
    """A row marked not resendable reads back so from a kill's log and from a chunk; a chunk
    written before the column existed reads back with it null."""
    gone = failed_row("g", "server_error", "a gateway's 500", resendable=False)
    first = store(tmp_path, every_rows=2)
    first.open()
    first.add(gone)
    first.add(row("a"))  # a chunk of two rows, the log replaced
    first.add(failed_row("k", "server_error", "500", resendable=False))
    die(first)  # the third row only in the log
    loaded = store(tmp_path).load().sort("custom_id")
    assert loaded["resendable"].to_list() == [None, False, False]
    chunk = next(tmp_path.glob(f"{PREFIX}/chunk-*.parquet"))
    storage = Storage(str(tmp_path))
    key = str(chunk.relative_to(tmp_path))
    storage.write_parquet(key, storage.read_parquet(key).drop("resendable"))  # an older Maple's
    again = store(tmp_path).load().sort("custom_id")
    assert again["custom_id"].to_list() == ["a", "g", "k"]
    assert again["resendable"].to_list() == [None, None, False]


def test_answers_of_one_event_loop_step_share_one_write_and_a_send_writes_at_once(
    tmp_path: Path,
) -> None:
    run = store(tmp_path)
    run.open()
    assert run._wal is not None
    log = Path(run._wal.name)
    writes: list[bytes] = []
    real = run._wal.write

    def write(data: bytes) -> int:
        writes.append(data)
        return real(data)

    run._wal.write = write  # type: ignore[method-assign]

    async def answers() -> None:
        run.sending(["a", "b", "c"])  # before they go: on disk at once
        assert log.read_bytes().count(b"sending") == 1
        for custom_id in ("a", "b"):
            run.add(row(custom_id))
        run.unbilled(["c"])
        assert len(writes) == 1  # the step's answers wait for its end
        await asyncio.sleep(0)
        assert len(writes) == 2  # then go in one write
        run.add(row("d"))
        run.sending(["e"])  # a send writes the answer waiting before it, in the same write
        assert len(writes) == 3 and writes[-1].count(b"\n") == 2

    asyncio.run(answers())
    die(run)
    rerun = store(tmp_path)
    assert rerun.open()["custom_id"].to_list() == ["a", "b", "d"]
    assert rerun.lost() == {"e": 1}
    rerun.close()
