"""Request kinds are records (``maple_engine.model.KINDS``): stored and shown by their names, each
consistent with the job spec, and read by the stages instead of named by them, so another kind
is one more record plus the support of its providers."""

import re
from pathlib import Path

import orjson
import pytest

from maple_engine.errors import ConfigError
from maple_engine.model import CHAT, EMBEDDING, KINDS, OUTPUT_COLUMNS, kind_named
from maple_engine.providers.registry import PROVIDERS, capabilities
from maple_engine.spec import JobSpec, build_spec, job_options

ROOT = Path(__file__).resolve().parents[2]

# The modules outside the providers that name a kind, and why: each declares one, none branches
# on it (a provider's request body and capabilities do, being its support for the kind).
NAMES_A_KIND = {
    "maple_engine/model.py": "the records and their registry",
    "maple_engine/spec.py": "a job's kind by default: chat",
    "maple_engine/inputs/tokens.py": "output_tokens_per_request's default kind: chat",
    "maple_assets/factory.py": "embedding() declares an embedding",
    "maple_assets/components.py": "EmbeddingComponent declares an embedding, as embedding()",
    "maple_assets/cli/commands.py": "maple enrich and maple embed: one kind per command",
}
KIND_NAME = re.compile(r"\b(CHAT|EMBEDDING)\b(?!_)")


def test_kinds_are_stored_and_shown_by_their_names() -> None:
    assert list(KINDS) == ["chat", "embedding"]
    assert (str(CHAT), str(EMBEDDING)) == ("chat", "embedding")
    spec = build_spec(name="e", kind="embedding", text="{title}", model="m", dimensions=8)
    stored = orjson.loads(orjson.dumps(spec.to_json()))
    assert stored["kind"] == "embedding"
    assert JobSpec(**stored) == spec and JobSpec(**stored).kind is EMBEDDING
    assert kind_named("chat") is CHAT and kind_named(EMBEDDING) is EMBEDDING
    with pytest.raises(ConfigError, match="kind 'rerank' is not one of chat, embedding"):
        build_spec(name="e", kind="rerank", prompt="{t}", model="m")


@pytest.mark.parametrize("kind", list(KINDS.values()), ids=list(KINDS))
def test_each_kind_is_consistent_with_the_job_spec(kind: object) -> None:
    assert kind is KINDS[str(kind)]
    record = kind_named(str(kind))
    assert record.template_field in record.options
    assert set(record.options) <= set(JobSpec.model_fields)
    assert set(record.options) <= set(job_options(record))
    assert record.output_column in OUTPUT_COLUMNS
    assert record.output_formats and set(record.output_formats) <= {"parquet", "csv"}
    assert record.output_name.format(stem="in", ext="csv").startswith("in_")
    assert record.collect_parallelism >= 1
    others = [other for other in KINDS.values() if other != record]
    assert all(
        f not in job_options(record) for o in others for f in o.options if f not in record.options
    )


def test_every_provider_serves_known_kinds_and_chat() -> None:
    for name in PROVIDERS:
        kinds = capabilities(name).kinds
        assert kinds <= set(KINDS.values()) and CHAT in kinds, name


def test_only_declarations_name_a_kind_outside_the_providers() -> None:
    found = {
        str(path.relative_to(ROOT))
        for folder in ("maple_engine", "maple_assets", "resources", "partitions")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "providers" not in path.relative_to(ROOT).parts
        and KIND_NAME.search(path.read_text(encoding="utf-8"))
    }
    assert found <= set(NAMES_A_KIND), sorted(found - set(NAMES_A_KIND))
