"""Regenerate ``openai-openapi-2025-04-29.subset.json`` from OpenAI's full OpenAPI spec.

    python tests/emulator/vendor_openai_spec.py ../shared/reference/openai-openapi-2025-04-29.yaml

Keeps the component schemas the emulator contract tests validate against (``ROOTS``) and every
schema they reference, so a fresh clone runs those tests without the 1.4 MB spec. The spec is
MIT-licensed (https://github.com/openai/openai-openapi).
"""

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOTS = (
    "Batch",
    "BatchRequestOutput",
    "CreateChatCompletionResponse",
    "CreateEmbeddingResponse",
    "ListBatchesResponse",
    "ListFilesResponse",
    "OpenAIFile",
    "Response",
)
OUT = Path(__file__).with_name("openai-openapi-2025-04-29.subset.json")
PREFIX = "#/components/schemas/"


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def subset(spec: dict[str, Any]) -> dict[str, Any]:
    schemas = spec["components"]["schemas"]
    keep: dict[str, Any] = {}
    todo = list(ROOTS)
    while todo:
        name = todo.pop()
        if name not in keep:
            keep[name] = schemas[name]
            todo += [r.removeprefix(PREFIX) for r in refs(schemas[name])]
    note = (
        f"Subset of OpenAI's published OpenAPI spec ({Path(sys.argv[1]).name}): the component "
        "schemas the emulator contract tests validate against and every schema they reference. "
        "Regenerate with tests/emulator/vendor_openai_spec.py."
    )
    info = {**spec["info"], "x-maple-note": note}
    return {"openapi": spec["openapi"], "info": info, "components": {"schemas": keep}}


def main() -> None:
    with open(sys.argv[1], "rb") as handle:
        spec = yaml.load(handle, Loader=yaml.CSafeLoader)
    doc = subset(spec)
    doc["components"]["schemas"] = dict(sorted(doc["components"]["schemas"].items()))
    OUT.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
