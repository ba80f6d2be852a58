"""The components' attributes are ``enrichment()``'s and ``embedding()``'s keywords, generated from
``JobSpec``: every job option of the kind, by the factory's name, with the field's default,
bounds and help, as tests/unit/test_job_spec.py holds the factories' signatures to it."""

import inspect

import pytest
import yaml

from maple_assets.components import (
    GRAPH_OPTIONS,
    EmbeddingComponent,
    EnrichmentComponent,
    JobComponent,
    scaffold_yaml,
)
from maple_assets.factory import embedding, enrichment
from maple_engine.model import CHAT, EMBEDDING, Kind
from maple_engine.spec import ALIASES, DEFAULTS, JobSpec, job_options

COMPONENTS: dict[Kind, type[JobComponent]] = {
    CHAT: EnrichmentComponent,
    EMBEDDING: EmbeddingComponent,
}
FACTORIES = {CHAT: enrichment, EMBEDDING: embedding}
FIELD_OF = {alias: field for field, alias in ALIASES.items()}
# Attributes whose help says what YAML writes there, not what the CLI's flag takes.
YAML_HELP = {"source", "response_schema"}
BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


@pytest.mark.parametrize("kind", list(COMPONENTS), ids=str)
def test_attributes_are_the_factory_keywords(kind: Kind) -> None:
    attributes = COMPONENTS[kind].model().model_fields
    parameters = inspect.signature(FACTORIES[kind]).parameters
    assert list(attributes) != [] and set(attributes) == set(parameters)
    required = {name for name, info in attributes.items() if info.is_required()}
    assert required == {"name", "source", kind.template_field, "model"}
    assert {FIELD_OF.get(k, k) for k in attributes} - GRAPH_OPTIONS == set(job_options(kind))


@pytest.mark.parametrize("kind", list(COMPONENTS), ids=str)
def test_each_attribute_has_the_fields_default_bounds_and_help(kind: Kind) -> None:
    schema = COMPONENTS[kind].model().model_json_schema()["properties"]
    parameters = inspect.signature(FACTORIES[kind]).parameters
    for attribute, shown in schema.items():
        if attribute in GRAPH_OPTIONS:  # the factory's own keywords, not job options
            assert shown.get("default") == parameters[attribute].default, attribute
            continue
        field = FIELD_OF.get(attribute, attribute)
        info = JobSpec.model_fields[field]
        if not info.is_required() and field not in ("source", kind.template_field):
            assert shown["default"] == getattr(DEFAULTS, field), attribute
        if field not in YAML_HELP:
            assert shown["description"] == info.description, attribute
        bounds = {
            BOUNDS[name]: getattr(bound, name)
            for bound in info.metadata
            for name in BOUNDS
            if getattr(bound, name, None) is not None
        }
        assert {k: shown[k] for k in BOUNDS.values() if k in shown} == bounds, attribute


def test_the_bounds_reach_the_schema() -> None:
    """Spot values, so that the generic comparison above cannot pass on two empty sides."""
    schema = EnrichmentComponent.model().model_json_schema()["properties"]
    assert schema["max_batch_bytes"]["minimum"] == 1
    assert (
        schema["stall_percentile"]["minimum"],
        schema["stall_percentile"]["exclusiveMaximum"],
    ) == (
        50,
        100,
    )
    assert schema["deadline"]["exclusiveMinimum"] == 0
    assert "text" not in schema and "dimensions" not in schema
    assert "prompt" not in EmbeddingComponent.model().model_json_schema()["properties"]


@pytest.mark.parametrize("kind", list(COMPONENTS), ids=str)
def test_the_scaffold_sets_the_required_attributes_and_shows_every_other(kind: Kind) -> None:
    text = scaffold_yaml(f"maple_assets.{COMPONENTS[kind].__name__}", kind, "tags", {})
    written = yaml.safe_load(text)
    assert written["type"] == f"maple_assets.{COMPONENTS[kind].__name__}"
    assert set(written["attributes"]) == {"name", "source", kind.template_field, "model"}
    assert written["attributes"]["name"] == "tags"
    commented = {
        line.strip().removeprefix("# ").split(":")[0]
        for line in text.splitlines()
        if line.startswith("  # ") and ": " in line
    }
    optional = set(COMPONENTS[kind].model().model_fields) - set(written["attributes"])
    assert optional <= commented
    given = scaffold_yaml("t", kind, "not a job name!", {"model": "m", "source": "raw/items"})
    assert yaml.safe_load(given)["attributes"]["source"] == "raw/items"
    assert yaml.safe_load(given)["attributes"]["name"] == f"my_{kind.name}"
