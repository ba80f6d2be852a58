"""This project beside bespokelabs-curator, same emulator, same prompts, runs alternating.

Each pair runs ``maple enrich`` and curator (in its own virtual environment) one after the
other against one emulator process, for the batch mode (OpenAI Batch API) and the online mode
(chat completions under an undisclosed rate limit, both learn it from the headers), and prints
wall time, CPU time (user + system, children included) and peak RSS of each, with the ratios
maple / curator per pair and their medians.

    python -m venv /work/venv-peers
    /work/venv-peers/bin/pip install bespokelabs-curator==0.1.31   # the 'peers' extra's pin
    python bench/peers.py --peer-python /work/venv-peers/bin/python
    python bench/peers.py --batch-rows 100000 --online-rows 3000 --rpm 2700 --pairs 3

Curator runs offline with ``TELEMETRY_ENABLED=false``, ``LITELLM_LOCAL_MODEL_COST_MAP=True``,
``HF_HUB_OFFLINE=1`` and ``TIKTOKEN_CACHE_DIR`` at the BPE files litellm ships (set here).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realtime import start_emulator

HERE = Path(__file__).resolve().parent


def measured(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """(wall s, CPU s of the process and its children, peak RSS MiB of the largest)."""
    started = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{cmd[:4]} failed:\n{err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024


def prompts(path: Path, rows: int) -> Path:
    n = pl.int_range(rows, eager=True)
    frame = pl.DataFrame({"n": n}).select(
        pl.format(
            "Extract the brand and the size from: Brand {} organic item {} 500 g",
            pl.col("n") % 97,
            pl.col("n"),
        ).alias("prompt")
    )
    frame.write_parquet(path)
    return path


def peer_env(python: str) -> dict[str, str]:
    site = subprocess.run(
        [python, "-c", "import litellm, os; print(os.path.dirname(litellm.__file__))"],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"),
    ).stdout.strip()
    return dict(
        os.environ,
        TELEMETRY_ENABLED="false",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        HF_HUB_OFFLINE="1",
        TIKTOKEN_CACHE_DIR=str(Path(site) / "litellm_core_utils" / "tokenizers"),
        OPENAI_API_KEY="bench",
    )


def maple_cmd(mode: str, source: Path, work: Path) -> list[str]:
    provider = "emulator" if mode == "batch" else "openai-realtime"
    return [
        *(sys.executable, "-m", "maple_assets.cli", "enrich", str(source)),
        *("--prompt", "{prompt}", "--model", "gpt-4o-mini", "--provider", provider),
        *("--storage", str(work / "store"), "--output", str(work / "out.parquet")),
        *("--poll-interval", "0.1", "--quiet", "--job", "peers"),
    ]


def pair(mode: str, args: argparse.Namespace, source: Path, env: dict[str, str]) -> list[tuple]:
    rpm = args.rpm if mode == "online" else None
    emulator, url = start_emulator(rpm, None, args.burst_seconds, args.batch_seconds)
    results = []
    try:
        for turn in ("maple", "curator") if args.maple_first else ("curator", "maple"):
            work = Path(tempfile.mkdtemp(prefix=f"peers-{turn}-"))
            if turn == "maple":
                menv = dict(
                    os.environ,
                    MAPLE_EMULATOR_URL=url,
                    OPENAI_BASE_URL=f"{url}/v1",
                    OPENAI_API_KEY="bench",
                    DAGSTER_HOME=str(work / "dagster"),
                    HOME=str(work),
                )
                results.append((turn, *measured(maple_cmd(mode, source, work), menv)))
            else:
                cenv = dict(env, CURATOR_CACHE_DIR=str(work / "cache"), HOME=str(work))
                cmd = [
                    args.peer_python,
                    str(HERE / "peer_curator.py"),
                    url,
                    mode,
                    str(source),
                    str(work),
                ]
                results.append((turn, *measured(cmd, cenv)))
            shutil.rmtree(work, ignore_errors=True)
    finally:
        emulator.terminate()
        emulator.wait()
    args.maple_first = not args.maple_first  # alternate who goes first
    return sorted(results)  # curator, maple


def report(mode: str, rows: int, runs: list[list[tuple]]) -> None:
    print(f"\n{mode}: {rows:,} prompts, {len(runs)} pairs (load {os.getloadavg()[0]:.1f})")
    print(f"{'':8} {'wall s':>8} {'CPU s':>8} {'RSS MiB':>8}")
    for i, ((_, cw, cc, cr), (_, mw, mc, mr)) in enumerate(runs):
        print(
            f"pair {i + 1}  curator {cw:7.1f} {cc:8.1f} {cr:8d}   maple {mw:7.1f} {mc:8.1f} "
            f"{mr:8d}   ratio maple/curator {mw / cw:5.2f} {mc / cc:5.2f} {mr / cr:5.2f}"
        )
    med = [statistics.median(m[i] / c[i] for c, m in runs) for i in (1, 2, 3)]
    print(f"median ratio maple/curator: wall {med[0]:.2f}x  CPU {med[1]:.2f}x  RSS {med[2]:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peer-python", default=os.environ.get("PEERS_PYTHON", "/work/venv-peers/bin/python")
    )
    parser.add_argument("--batch-rows", type=int, default=20_000)
    parser.add_argument("--online-rows", type=int, default=1_000)
    parser.add_argument("--rpm", type=int, default=3_000, help="The online mode's limit.")
    parser.add_argument("--burst-seconds", type=float, default=2.0)
    parser.add_argument("--batch-seconds", type=float, default=0.2, help="Emulator batch time.")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--modes", default="batch,online")
    args = parser.parse_args()
    args.maple_first = True
    env = peer_env(args.peer_python)
    tmp = Path(tempfile.mkdtemp(prefix="peers-"))
    for mode in args.modes.split(","):
        rows = args.batch_rows if mode == "batch" else args.online_rows
        source = prompts(tmp / f"{mode}.parquet", rows)
        runs = [pair(mode, args, source, env) for _ in range(args.pairs)]
        report(mode, rows, runs)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
