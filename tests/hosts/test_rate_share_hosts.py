"""One real-time limit across hosts, through the deployment's database: two simulated hosts
(tests/hosts/harness.py), each with a storage root of its own and ``MAPLE_COST_DB`` on one
PostgreSQL, run ``maple enrich --provider openai-realtime`` on one account and model; the
emulator enforces one 2,400 RPM limit over one-second windows. Together they reach >= 98% of it
once settled (>= 95% from the first request) with <= 0.5% 429s; when one host is lost (every
process SIGKILLed, no cleanup) the other takes the whole limit within seconds."""

import contextlib
import os
from pathlib import Path

import polars as pl
import pytest

from maple_engine.ledger.rate_holders import BEAT_S, WINDOW_S
from tests.hosts import rates
from tests.hosts.harness import BIN, hosts
from tests.integration.test_costs_postgres import pg_url, server_url

pytestmark = pytest.mark.postgres
__all__ = ["pg_url", "server_url"]  # fixtures
REPO = Path(__file__).parents[2]
RPM = 2400
ROWS = {"host-a": 1300, "host-b": 1100}
SHARED_S = 15.0  # both hosts send this long before A is lost
#: The share "together" is measured from this long after both hold a row: until each has seen
#: the other's (a beat), both send at the whole limit; the window they overfill is paid back by
#: pausing to its reset, and the second after that runs below the split (measured from 1.25 s
#: after, that dip alone made 96.9-98.3% of a share that is 99.7% settled).
SETTLE_S = 3.0


def enrich(table: Path, root: Path, job: str) -> list[str]:
    return [
        str(BIN / "maple"), "enrich", str(table), "--prompt", "Brand of {title}", "--model",
        "gpt-4o-mini", "--provider", "openai-realtime", "--storage", str(root), "--job", job,
        "--output", str(root / "out.parquet"), "--quiet",
    ]  # fmt: skip


@pytest.mark.slow  # ~1 min: two hosts' maple enrich at 2,400 RPM for ~45 s
@pytest.mark.paced
@pytest.mark.timeout(400)
def test_two_hosts_share_one_limit_through_the_database_and_a_lost_one_gives_it_back(
    tmp_path: Path, pg_url: str
) -> None:
    with rates.emulator(RPM) as url:
        sampler = rates.Sampler(url, pg_url)
        sampler.start()
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_BASE_URL": f"{url}/v1",
               "OPENAI_API_KEY": "one-account", "MAPLE_COST_DB": pg_url}  # fmt: skip
        with contextlib.closing(sampler), hosts(tmp_path, env, *ROWS) as (a, b):
            procs = {}
            for host in (a, b):
                table = host.home / "in.parquet"
                titles = [f"{host.name} item {i}" for i in range(ROWS[host.name])]
                pl.DataFrame({"title": titles}).write_parquet(table)
                argv = enrich(table, host.home / "root", host.name)
                procs[host.name] = host.start(argv, "enrich", DAGSTER_HOME=str(host.home / "dg"))
            both = rates.wait_for_holders(sampler, 2, timeout=120, story=a.log("enrich"))
            rates.sleep_until(both + SHARED_S)
            lost = a.kill()
            assert procs["host-b"].wait(timeout=240) == 0, b.log("enrich")[-3000:]
            samples = sampler.finish()
    whole = rates.share(samples, RPM, rates.first_request(samples) - rates.SAMPLE_S, lost - 0.2)
    together = rates.share(samples, RPM, both + SETTLE_S, lost - 0.2)
    last = samples[-1]
    refused = last.refused / last.sent
    back = rates.recovery(samples, RPM, lost)
    dropped = next(s.at for s in samples if s.at > lost and s.holders == 1) - lost
    print(
        f"\n2 hosts through PostgreSQL: {whole:.1%} of {RPM} RPM from the first request, "
        f"{together:.1%} once both hold shares, {last.refused} 429s ({refused:.2%} of "
        f"{last.sent}); host A lost: its row stopped counting after {dropped:.1f} s, B back at "
        f"95% of the limit {back:.1f} s after"
    )
    # Measured alone: 98.1-98.8% from the first request (the hosts' start-ups in it), 99.3-99.9%
    # once settled. Beside test_crash's four emulators the senders were starved of CPU, hence
    # `paced`: scripts/check runs it alone. A split of 1/N would give ~50% to one host and a
    # double count 429s, so 98% settled tells a correct split; 95% whole, a start-up that idles.
    assert whole >= 0.95, whole
    assert together >= 0.98, together
    assert refused <= 0.005, (last.refused, last.sent)
    assert dropped <= WINDOW_S + 0.5, dropped  # A beat at most BEAT_S before it was lost
    assert back <= WINDOW_S + 2 * BEAT_S + 1.5, back  # B's next beat, plus a second measured
    out = pl.read_parquet(tmp_path / "host-b" / "root" / "out.parquet")
    assert out.height == ROWS["host-b"] and out["llm_status"].unique().to_list() == ["succeeded"]
    for host in ("host-a", "host-b"):  # shared through the database, not the storage roots
        assert not list((tmp_path / host / "root").rglob("_ratelimits/**/*.json"))
