"""``maple enrich`` on a real-time provider reaches the rate limit whatever the provider's limiter:
fixed one-second windows, or a continuous token bucket holding two seconds of the limit. The
limit is not told; the sender learns it from the answers' headers."""

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from tests.integration.test_realtime import catalog, enrich_args, point_at

RPM, ROWS = 1200, 500  # about 25 s at the limit
WARM_S = 4.0  # steady state: from this long after the first request to 95% done


class Admissions(threading.Thread):
    """The emulator's billed requests every 50 ms: (time, billed)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.seen, self.stop = url, list[tuple[float, int]](), threading.Event()

    def run(self) -> None:
        with httpx.Client(timeout=5) as http:
            while not self.stop.wait(0.05):
                billed = http.get(f"{self.url}/_emulator/stats").json()["requests_billed"]
                self.seen.append((time.monotonic(), billed))

    def steady_rpm(self) -> float:
        first = next(t for t, billed in self.seen if billed > 0)
        steady = [s for s in self.seen if s[0] >= first + WARM_S and s[1] <= 0.95 * ROWS]
        (t0, b0), (t1, b1) = steady[0], steady[-1]
        return (b1 - b0) / (t1 - t0) * 60


@pytest.fixture
def sampled() -> Iterator[list[Admissions]]:
    made: list[Admissions] = []
    yield made
    for sampler in made:
        sampler.stop.set()


@pytest.mark.slow
@pytest.mark.paced
@pytest.mark.parametrize(("limiter", "burst"), [("bucket", 2.0), ("window", 1.0)])
def test_enrich_reaches_the_limit_on_windows_and_on_a_bucket(
    limiter: str,
    burst: float,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    sampled: list[Admissions],
) -> None:
    config = EmulatorConfig(batch_seconds=0, rpm=RPM, burst_seconds=burst, limiter=limiter)
    with EmulatorServer(config) as running:
        point_at(running, monkeypatch)
        source = catalog(tmp_path / "in.parquet", ROWS)
        args = enrich_args(source, tmp_path / "out.parquet", tmp_path / "store", "openai-realtime")
        sampler = Admissions(running.url)
        sampled.append(sampler)
        sampler.start()
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        sampler.stop.set()
        sampler.join()
        stats = running.stats()
    assert result.exit_code == 0, result.output
    assert pl.read_parquet(tmp_path / "out.parquet")["llm_status"].eq("succeeded").all()
    assert stats["requests_billed"] == ROWS and stats["bodies_billed_twice"] == 0
    assert stats["realtime_429"] <= 0.005 * ROWS, stats
    assert sampler.steady_rpm() >= 0.98 * RPM
