"""``maple providers`` as a user runs it: a table by default, a JSON list of every name with
the contract's keys, and the Markdown committed as docs/providers.md."""

import json
from pathlib import Path

from maple_engine.providers.registry import PROVIDERS
from tests.e2e.cli import maple
from tests.unit.test_provider_descriptions import KEYS  # the contract's keys, in order

ROOT = Path(__file__).resolve().parents[2]


def test_json_lists_every_name_with_the_contracts_keys() -> None:
    done = maple("providers", "--format", "json")
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert [entry["name"] for entry in listed] == list(PROVIDERS)
    assert all(list(entry) == KEYS for entry in listed)
    by_name = {entry["name"]: entry for entry in listed}
    assert by_name["openai"]["lanes"] == ["batch", "realtime", "flex", "priority"]
    assert (by_name["openai-flex"]["lanes"], by_name["openai-flex"]["batch_discount"]) == (
        ["flex"],
        0.5,
    )
    assert by_name["mistral"]["results_retention_s"] == 86400
    # the vendors' own pages: Groq's batch is 50% off, DeepInfra's 20% with its own variables
    assert by_name["groq"]["batch_discount"] == 0.5
    deepinfra = by_name["deepinfra"]
    assert (deepinfra["batch_discount"], deepinfra["env"]) == (
        0.2,
        ["DEEPINFRA_API_KEY", "DEEPINFRA_BASE_URL"],
    )
    assert by_name["openai-realtime"]["batch_discount"] is None


def test_the_table_and_the_markdown() -> None:
    table = maple("providers")
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split() for line in table.stdout.splitlines()[2:]}
    assert list(rows) == list(PROVIDERS)
    assert rows["groq"][3:6] == ["-", "batch,realtime", "50%"]  # files, lanes, discount
    assert rows["gemini"][3] == "pdf,image,audio"
    docs = maple("providers", "--format", "markdown")
    assert docs.stdout == (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
