"""One real-time rate limit shared by runs on several hosts, against the emulator.

N simulated hosts (each its own UTS namespace and host name, tests/hosts/harness.py) each run
``maple enrich --provider openai-realtime`` on their own job, all on one account and model; the
emulator (a separate process, ``maple emulator --rpm``) enforces one limit over per-second
windows. Two ways of sharing it (``maple_engine.send.rate_shares``):

- ``database``: ``MAPLE_COST_DB`` on one PostgreSQL (``rate_holders``), each host its own
  storage root (``$MAPLE_TEST_POSTGRES_URL``, else a throwaway server from the distribution's
  binaries, as the tests start one);
- ``files``: no database, heartbeats under the one storage root every host shares.

Prints, for each way and N: the requests served as a share of the limit from the first request
to the last (start-up of the later hosts and the tail after the first host finishes included),
the same over the steady middle (all hosts sending), and the 429s. ``--kill`` then runs N hosts
again and SIGKILLs every process of the first one mid-run: how long until the others serve
95% of the limit again. Needs root (``unshare --uts``).

    python bench/hosts_rate_share.py                    # both ways, 2 and 3 hosts, 2,400 RPM
    python bench/hosts_rate_share.py --way database --hosts 3 --kill
"""

import argparse
import contextlib
import os
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

REPO = Path(__file__).parents[1]
sys.path[:0] = [str(REPO)]

from tests.hosts import rates  # noqa: E402
from tests.hosts.harness import BIN, hosts  # noqa: E402
from tests.integration.test_costs_postgres import fresh_database, postgres_server  # noqa: E402


def run(
    n: int, rpm: int, rows: int, work: Path, *, db: str | None, kill_after: float | None
) -> None:
    with rates.emulator(rpm) as url:
        sampler = rates.Sampler(url, db)
        sampler.start()
        env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_BASE_URL": f"{url}/v1",
               "OPENAI_API_KEY": "one-account", "DAGSTER_HOME": ""}  # fmt: skip
        if db:
            env["MAPLE_COST_DB"] = db
        names = [f"host-{i}" for i in range(n)]
        lost = None
        with contextlib.closing(sampler), hosts(work, env, *names) as machines:
            procs = []
            for i, host in enumerate(machines):
                table = host.home / "in.parquet"
                titles = [f"{host.name} item {j}" for j in range(rows)]
                pl.DataFrame({"title": titles}).write_parquet(table)
                root = host.home / "root" if db else work / "store"
                argv = [
                    str(BIN / "maple"), "enrich", str(table), "--prompt", "Brand of {title}",
                    "--model", "gpt-4o-mini", "--provider", "openai-realtime",
                    "--storage", str(root), "--job", f"job{i}",
                    "--output", str(host.home / "out.parquet"), "--quiet",
                ]  # fmt: skip
                procs.append(host.start(argv, log="enrich", DAGSTER_HOME=str(host.home / "dg")))
            if kill_after is not None:
                while not sampler.samples or sampler.samples[-1].sent == 0:
                    time.sleep(0.1)
                rates.sleep_until(rates.first_request(sampler.samples) + kill_after)
                lost = machines[0].kill()
            for host, proc in zip(machines, procs, strict=True):
                if host is machines[0] and lost is not None:
                    continue
                if (code := proc.wait(timeout=1800)) != 0:
                    raise SystemExit(f"{host.name} exit {code}:\n{host.log('enrich')[-3000:]}")
            samples = sampler.finish()
    way = "database" if db else "files"
    if lost is None:
        report(way, n, rpm, rows, samples)
    else:
        back = rates.recovery(samples, rpm, lost)
        print(f"{way}, {n} hosts at {rpm} RPM: host-0 lost {kill_after:g} s in; the others at "
              f"95% of the limit again {back:.1f} s later", flush=True)  # fmt: skip


def report(way: str, n: int, rpm: int, rows: int, samples: list[rates.Sample]) -> None:
    total = n * rows
    first, last = rates.first_request(samples), rates.all_billed(samples, total)
    whole = rates.share(samples, rpm, first, last)
    middle = [s.at for s in samples if first + 10 <= s.at and s.billed <= 0.8 * total]
    steady = rates.share(samples, rpm, middle[0], middle[-1]) if middle else float("nan")
    end = samples[-1]
    print(
        f"{way}, {n} hosts x {rows} rows at {rpm} RPM: {end.billed} billed in "
        f"{last - first:.1f} s = {whole:.1%} of the limit first to last request, {steady:.1%} "
        f"steady; {end.refused} 429s ({end.refused / max(end.sent, 1):.2%} of {end.sent})",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, nargs="*", default=[2, 3])
    parser.add_argument("--way", nargs="*", choices=["database", "files"],
                        default=["database", "files"])  # fmt: skip
    parser.add_argument("--rpm", type=int, default=2400)
    parser.add_argument("--rows", type=int, default=0, help="rows per host (default: 45 s)")
    parser.add_argument("--kill", action="store_true", help="also lose host-0 mid-run")
    parser.add_argument("--kill-after", type=float, default=20.0)
    args = parser.parse_args()
    with postgres_server() as server:
        for way in args.way:
            for n in args.hosts:
                rows = args.rows or int(args.rpm / 60 * 45 / n)
                kills = [None, args.kill_after] if args.kill else [None]
                for kill_after in kills:
                    with contextlib.ExitStack() as stack:
                        work = Path(stack.enter_context(tempfile.TemporaryDirectory()))
                        db = (
                            stack.enter_context(fresh_database(server, "maple_bench"))
                            if way == "database"
                            else None
                        )
                        run(n, args.rpm, rows, work, db=db, kill_after=kill_after)


if __name__ == "__main__":
    main()
