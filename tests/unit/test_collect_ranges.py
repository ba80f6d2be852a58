"""The sensor's collect runs: batches that ended by one tick go in one run per contiguous range
of shards, and a range still collecting is asked for again (the same run key) instead of a new
run for the shards it has not reached."""

import dagster as dg

from maple_assets.graph.collect_ranges import RANGE_SHARDS, gather_collects
from maple_assets.graph.sensor_cursor import collecting, fresh_requests
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_END_TAG as RANGE_END,
)
from resources.dagster_private import (
    ASSET_PARTITION_RANGE_START_TAG as RANGE_START,
)

RAW, SUBMISSIONS = dg.AssetKey(["job", "raw_responses"]), dg.AssetKey(["job", "submissions"])
ORDER = [f"s{n:05d}" for n in range(40)]
TAGS = {"maple/job": "job"}


def collect(shard: str, batch: str = "b") -> dg.RunRequest:
    return dg.RunRequest(
        run_key=f"job:{shard}:collect:{batch}{shard}:1",
        asset_selection=[RAW],
        partition_key=shard,
        tags=TAGS,
    )


def ranges(requests: list[dg.RunRequest]) -> list[tuple[str, str]]:
    return [(r.tags[RANGE_START], r.tags[RANGE_END]) for r in requests if RANGE_START in r.tags]


def test_consecutive_shards_go_in_one_run_and_a_gap_cuts_it() -> None:
    submit = dg.RunRequest(run_key="job:s00009:submit:1", asset_selection=[SUBMISSIONS])
    asked = [collect(s) for s in ("s00002", "s00000", "s00001", "s00005")] + [submit]
    requests, held = gather_collects(asked, RAW, ORDER, {})
    assert ranges(requests) == [("s00000", "s00002")]
    singles = [r.partition_key for r in requests if r.partition_key]
    assert singles == ["s00005"] and submit in requests and len(requests) == 3
    (key, record), = held.items()  # fmt: skip
    assert key.startswith("job:s00000..s00002:collect:") and len(record["members"]) == 3
    ranged = next(r for r in requests if r.run_key == key)
    assert ranged.asset_selection == [RAW] and ranged.tags["maple/job"] == "job"


def test_a_range_takes_at_most_range_shards() -> None:
    requests, _ = gather_collects([collect(s) for s in ORDER[:20]], RAW, ORDER, {})
    assert ranges(requests) == [
        (ORDER[0], ORDER[RANGE_SHARDS - 1]),
        (ORDER[RANGE_SHARDS], ORDER[19]),
    ]


def test_a_range_still_collecting_is_asked_again_not_split() -> None:
    first, held = gather_collects([collect(s) for s in ORDER[:3]], RAW, ORDER, {})
    fresh, cursor = fresh_requests(first, None, {"collecting": held})
    assert len(fresh) == 1
    # the run collected s00000; s00001 and s00002 still wait, and s00003's batch ended since
    later = [collect(s) for s in ORDER[1:4]]
    second, held_now = gather_collects(later, RAW, ORDER, collecting(cursor))
    assert [r.run_key for r in second if RANGE_START in r.tags] == [first[0].run_key]
    assert [r.partition_key for r in second if RANGE_START not in r.tags] == ["s00003"]
    fresh, cursor = fresh_requests(second, cursor, {"collecting": held_now})
    assert [r.partition_key for r in fresh] == ["s00003"]  # the range was asked already
    # a retry's batch is a new collect key: not held by the old range
    retried, _ = gather_collects([collect("s00001", "retry")], RAW, ORDER, collecting(cursor))
    assert [r.run_key for r in retried] == [collect("s00001", "retry").run_key]


def test_without_the_shards_order_the_requests_stay_as_they_are() -> None:
    asked = [collect(s) for s in ORDER[:3]]
    assert gather_collects(asked, RAW, None, {}) == (asked, {})


def test_the_last_collects_in_one_range_materialize_merged_too() -> None:
    merged = dg.AssetKey(["job", "merged"])
    requests, held = gather_collects([collect(s) for s in ORDER[:3]], RAW, ORDER, {}, merged)
    (only,) = requests
    assert only.asset_selection == [RAW, merged] and ":collect+merged:" in str(only.run_key)
    assert held[str(only.run_key)]["then"] == merged.to_user_string()
    alone, _ = gather_collects([collect("s00007")], RAW, ORDER, {}, merged)  # one shard: a range
    assert alone[0].asset_selection == [RAW, merged] and ranges(alone) == [("s00007", "s00007")]
    split, _ = gather_collects([collect(s) for s in ("s00000", "s00002")], RAW, ORDER, {}, merged)
    assert all(r.asset_selection == [RAW] for r in split)  # two runs: merged waits for both
