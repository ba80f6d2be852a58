"""Which shards waiting for the batch queue could not end as batches before the deadline
(`maple_engine.submit.escalation.unreachable`)."""

from maple_engine.submit.escalation import unreachable

SHARDS = [f"s{i}" for i in range(10)]


def test_while_a_limit_is_probed_each_waiting_shard_waits_one_turn_more() -> None:
    # 10 s to the cutoff, the newest batch out for 2 s: the k-th waits (k - 1) x 2 s, runs 2 s
    late = unreachable(SHARDS, now=0.0, cutoff=10.0, wait_s=2.0, turnaround_s=0.0, probe=True)
    assert late == SHARDS[5:]  # s5 would end at 5 x 2 + 2 = 12 s (s4 at the cutoff: in time)


def test_the_history_turnaround_counts_when_longer_than_the_wait() -> None:
    late = unreachable(SHARDS, now=0.0, cutoff=10.0, wait_s=1.0, turnaround_s=8.0, probe=True)
    assert late == SHARDS[3:]  # s3: 3 turns of 1 s, then 8 s


def test_a_known_limit_waits_one_turn_for_every_shard() -> None:
    assert (
        unreachable(SHARDS, now=0.0, cutoff=10.0, wait_s=4.0, turnaround_s=0.0, probe=False) == []
    )
    late = unreachable(SHARDS, now=0.0, cutoff=10.0, wait_s=1.0, turnaround_s=12.0, probe=False)
    assert late == SHARDS  # the median batch ends past the cutoff: none can make it


def test_nothing_is_late_while_nothing_is_known() -> None:
    assert unreachable(SHARDS, now=0.0, cutoff=10.0, wait_s=0.0, turnaround_s=0.0, probe=True) == []
