"""Fixtures: a running emulator (``emulator``), a factory for custom configs, SDK clients, and
validators for OpenAI's published OpenAPI schemas."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from emulator.testing import MakeEmulator, SchemaCheck, anthropic_client, openai_client

# The part of OpenAI's 2025-04-29 OpenAPI spec these tests use, vendored (vendor_openai_spec.py).
SPEC_2025 = Path(__file__).with_name("openai-openapi-2025-04-29.subset.json")


@pytest.fixture
def emulator() -> Iterator[EmulatorServer]:
    """A running emulator whose batches finish by the first GET (``batch_seconds=0``)."""
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        yield server


@pytest.fixture
def make_emulator() -> MakeEmulator:
    """``with make_emulator(fail={"refused": 1.0}) as server: ...`` for custom configs."""

    def make(**config_kwargs: Any) -> EmulatorServer:
        config_kwargs.setdefault("batch_seconds", 0)
        return EmulatorServer(EmulatorConfig(**config_kwargs))

    return make


@pytest.fixture
def oai(emulator: EmulatorServer) -> Iterator[openai.OpenAI]:
    """OpenAI client on the default emulator."""
    with openai_client(emulator) as client:
        yield client


@pytest.fixture
def claude(emulator: EmulatorServer) -> Iterator[anthropic.Anthropic]:
    """Anthropic client on the default emulator."""
    with anthropic_client(emulator) as client:
        yield client


def _merged(schema: dict[str, Any], schemas: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with its ``$ref`` followed and its ``allOf`` parts' properties and required
    names gathered (the Responses API's ``Response`` is three parts)."""
    while "$ref" in schema:
        schema = schemas[schema["$ref"].rsplit("/", 1)[-1]]
    if "allOf" not in schema:
        return schema
    parts = [_merged(part, schemas) for part in schema["allOf"]]
    return {
        "required": [name for part in parts for name in part.get("required", [])],
        "properties": {k: v for part in parts for k, v in part.get("properties", {}).items()},
    }


def _drop_optional_nulls(instance: Any, schema: dict[str, Any], schemas: dict[str, Any]) -> Any:
    """Remove ``null`` values of optional properties before validating.

    OpenAI's spec declares many optional fields (``errors``, ``failed_at``, ``status_details``...)
    as non-nullable, yet the live API and the spec's own examples send them as ``null``. Required
    properties stay strict.
    """
    schema = _merged(schema, schemas)
    if not isinstance(instance, dict):
        if isinstance(instance, list) and isinstance(schema.get("items"), dict):
            return [_drop_optional_nulls(item, schema["items"], schemas) for item in instance]
        return instance
    required = set(schema.get("required", []))
    properties = schema.get("properties", {})
    return {
        key: _drop_optional_nulls(value, properties.get(key, {}), schemas)
        for key, value in instance.items()
        if value is not None or key in required
    }


def _without_implicit_discriminators(node: Any) -> Any:
    """The spec without its ``discriminator`` hints that have no ``mapping``: the validator
    would resolve the discriminating value itself as a schema name (``message``, ``reasoning``),
    which OpenAI's spec does not define; ``anyOf`` still decides."""
    if isinstance(node, dict):
        return {
            key: _without_implicit_discriminators(value)
            for key, value in node.items()
            if not (key == "discriminator" and "mapping" not in value)
        }
    if isinstance(node, list):
        return [_without_implicit_discriminators(value) for value in node]
    return node


@pytest.fixture(scope="session")
def openai_schema() -> SchemaCheck:
    """``openai_schema("Batch", obj)`` validates ``obj`` against OpenAI's 2025-04-29 spec."""
    import orjson
    from openapi_schema_validator import OAS30Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT4

    spec = _without_implicit_discriminators(orjson.loads(SPEC_2025.read_bytes()))
    registry: Registry[Any] = Registry().with_resource(
        "urn:openai", Resource.from_contents(spec, default_specification=DRAFT4)
    )

    schemas = spec["components"]["schemas"]

    def check(name: str, instance: Any) -> None:
        schema = {"$ref": f"urn:openai#/components/schemas/{name}"}
        OAS30Validator(schema, registry=registry).validate(
            _drop_optional_nulls(instance, schemas[name], schemas)
        )

    return check
