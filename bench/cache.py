"""What the prompt cache and the lanes save, against the emulator: one job with a long shared
system prompt run with ``--cache auto`` and ``--cache off`` on each lane, and the cost of each.

Prints, per provider: the share of input tokens read from cache with ``--cache auto``, its cost,
the same tokens uncached (the ledger's cost plus its cache saving), the cost of the ``--cache off``
run (OpenAI and Gemini cache without hints too), the ratio auto / uncached, and the wall time.

    python bench/cache.py                          # 1,000 rows, ~3,400-token system prompt
    python bench/cache.py --rows 5000 --rules 400  # longer prompt, more rows
"""

import argparse
import os
import tempfile
import time
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.ledger.costs import CostLedger

LANES = (
    ("anthropic", "claude-sonnet-4-5"),
    ("anthropic-realtime", "claude-sonnet-4-5"),
    ("openai", "gpt-4.1-mini"),
    ("openai-realtime", "gpt-4.1-mini"),
    ("openai-flex", "gpt-4.1-mini"),
    ("gemini", "gemini-2.5-flash"),
)


def run(source: Path, root: Path, provider: str, model: str, *, system: str, cache: str) -> float:
    args = ["enrich", str(source), "--prompt", "Brand of: {title}", "--system", system]
    args += ["--model", model, "--provider", provider, "--cache", cache, "--job", "bench"]
    args += ["--storage", str(root), "--output", str(root / "out.parquet")]
    args += ["--poll-interval", "0.1", "--quiet"]
    start = time.perf_counter()
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"{provider} --cache {cache}: exit {result.exit_code}\n{result.output}")
    return time.perf_counter() - start


def ledger(root: Path) -> dict[str, float]:
    with CostLedger(storage_root=str(root)) as costs:
        [report] = costs.report(by="job")
    return dict(report)


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--rules", type=int, default=200, help="rules in the system prompt")
    opts = parser.parse_args()
    system = "You extract the brand of a grocery product. Rules: " + " ".join(
        f"rule {i}: prefer the manufacturer's name over the retailer's label."
        for i in range(opts.rules)
    )
    print(f"{opts.rows:,} rows, system prompt ~{len(system) // 4:,} tokens")
    print(
        f"{'provider':<20}{'cached':>8}{'auto USD':>11}{'uncached':>11}{'off USD':>11}"
        f"{'ratio':>7}{'wall':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "in.parquet"
        titles = [f"Maple Farm oats {i} g" for i in range(opts.rows)]
        pl.DataFrame({"title": titles}).write_parquet(source)
        for provider, model in LANES:
            costs = {}
            wall = 0.0
            for cache in ("auto", "off"):
                with EmulatorServer(EmulatorConfig(batch_seconds=0.2)) as server:
                    for name, suffix in (("OPENAI", "/v1"), ("ANTHROPIC", ""), ("GEMINI", "")):
                        os.environ[f"{name}_BASE_URL"] = server.url + suffix
                        os.environ[f"{name}_API_KEY"] = "bench-key"
                    root = Path(tmp) / f"{provider}-{cache}"
                    seconds = run(source, root, provider, model, system=system, cache=cache)
                    wall = seconds if cache == "auto" else wall
                    costs[cache] = ledger(root)
            auto, off = costs["auto"], costs["off"]
            share = auto["cached_input_tokens"] / max(1, auto["input_tokens"])
            uncached = auto["cost_usd"] + auto["cache_savings_usd"]
            ratio = auto["cost_usd"] / uncached if uncached else 0.0
            print(
                f"{provider:<20}{share:>8.1%}{auto['cost_usd']:>11.4f}{uncached:>11.4f}"
                f"{off['cost_usd']:>11.4f}{ratio:>7.2f}{wall:>7.1f}s"
            )


if __name__ == "__main__":
    main_()
