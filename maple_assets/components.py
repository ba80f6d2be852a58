"""``EnrichmentComponent`` and ``EmbeddingComponent``: an enrichment or an embedding declared in a
``defs.yaml``, Dagster's Components way, built by the same ``enrichment()`` and ``embedding()``
factories as one declared in Python.

A component's attributes are the factory's keywords, generated from the one ``JobSpec`` (name,
default, help and bounds of every job option; ``deadline`` is ``deadline_s`` by its alias):

- ``source``: an upstream asset key (``raw/catalog``), which becomes a dependency in the graph,
  or a CSV / Parquet path or ``s3://`` URI (a string ending in ``.csv``, ``.parquet`` or
  ``.pq``); a relative path is read from the ``defs.yaml``'s folder, or from the project's root
  (the folder of its ``pyproject.toml``) when the file is there and not beside the YAML.
- ``response_schema``: a JSON schema written inline as YAML, or a JSON file's path (read as
  ``source`` is).
- Any string may be a Dagster template: ``{{ env.VAR }}`` reads an environment variable as the
  definitions load.

Before it builds anything the component checks its attributes with the same checks, and the
same one-line messages, as ``maple enrich``; a bad one fails ``dg check defs`` with
``FILE:LINE: attributes.FIELD: reason``. For a local file source the template's columns are
checked against the file's header (the only I/O as the definitions load)."""

import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

import dagster as dg
import yaml
from pydantic import BaseModel, Field, ValidationError, create_model

from maple_assets.declaration import check_deadline
from maple_assets.factory import Enrichment, embedding, enrichment
from maple_engine.errors import ConfigError
from maple_engine.inputs.api_params import check_endpoint, check_params
from maple_engine.inputs.checks import check_input_schema
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.inputs.sources import input_schema
from maple_engine.model import CHAT, EMBEDDING, Kind
from maple_engine.policy import job_policy
from maple_engine.providers.decorations import check_extra_body
from maple_engine.providers.registry import capabilities
from maple_engine.spec import (
    DEFAULTS,
    JobSpec,
    error_message,
    file_format,
    job_options,
    option_help,
    validate_name,
    validate_output,
    validate_source,
)
from maple_engine.storage.storage import is_remote

# The job options a factory takes by another name than the field's, and that name.
KEYWORDS = {"deadline_s": "deadline"}
FIELDS = {keyword: field for field, keyword in KEYWORDS.items()}
# The factories' own keyword, not a job option: the sensor's minimum interval.
POLL_INTERVAL = "poll_interval_s"
POLL_INTERVAL_DEFAULT = 30
# The factories' keywords of how the graph shows in Dagster, not job options.
GRAPH_OPTIONS = {POLL_INTERVAL, "group", "key_prefix", "blocking"}
# What YAML writes where the spec reads a Python value: a retry count may be "unlimited", a
# deadline a duration ("6h"), a response schema a file's path as well as a mapping.
YAML_TYPES: dict[str, Any] = {
    "retries": dict[str, int | Literal["unlimited"]],
    "deadline_s": str | float | None,
    "response_schema": dict[str, Any] | str | None,
}
# The bounds JobSpec's fields carry, as JSON schema keywords (``dg check yaml`` applies them).
BOUNDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def keyword(field: str) -> str:
    """The factory keyword, and so the component attribute, of a job option."""
    return KEYWORDS.get(field, field)


def attributes_model(kind: Kind) -> type[BaseModel]:
    """The attributes of a component of ``kind``: its job options, from ``JobSpec``.

    Each attribute also takes a string, as Dagster's own derived models do, so that a template
    (``{{ env.BUDGET }}``) can stand for a number; the spec checks the value it renders to."""
    fields: dict[str, Any] = {
        keyword(field): _attribute(field, kind) for field in job_options(kind)
    }
    fields[POLL_INTERVAL] = (
        int | str,
        Field(
            default=POLL_INTERVAL_DEFAULT,
            description="The sensor's minimum interval between polls of the provider, seconds.",
            json_schema_extra={"minimum": 1},
        ),
    )
    fields["group"] = (
        str | None,
        Field(default=None, description="The assets' group in Dagster (default: the name)."),
    )
    fields["key_prefix"] = (
        list[str] | None,
        Field(
            default=None,
            description="Path elements before every asset key of the job, e.g. [catalog, llm] "
            "makes catalog/llm/NAME/merged (default: none, NAME/merged).",
        ),
    )
    fields["blocking"] = (
        bool | str,
        Field(
            default=False,
            description="merged's failed_rows check blocks: a failure at ERROR (over "
            "error_failed_share) stops merged's downstream assets in the same run.",
        ),
    )
    model: type[BaseModel] = create_model(
        f"{kind.name.capitalize()}Attributes", __base__=dg.Model, **fields
    )
    return model


def _attribute(field: str, kind: Kind) -> tuple[Any, Any]:
    info = JobSpec.model_fields[field]
    annotation = YAML_TYPES.get(field, info.annotation)
    bounds = {
        BOUNDS[name]: getattr(bound, name)
        for bound in info.metadata
        for name in BOUNDS
        if getattr(bound, name, None) is not None
    }
    extra: dict[str, Any] = bounds
    required = field in ("name", "source", "model", kind.template_field)
    if required:
        default: Any = ...
    else:
        default = getattr(DEFAULTS, field)
        if isinstance(default, (dict, list)):
            extra = {**bounds, "default": default}
            default = None
    description = YAML_HELP.get(field, info.description)
    return (
        annotation | str if annotation is not str else str,
        Field(default=default, description=description, json_schema_extra=extra or None),
    )


# The help of the attributes that YAML writes otherwise than the CLI's flags.
YAML_HELP = {
    "source": "Input table: an upstream asset key (e.g. raw/catalog), or a CSV or Parquet path "
    "or s3:// URI (ending in .csv, .parquet or .pq; a relative path is read from this file's "
    "folder, or from the project's root when the file is there and not beside this one).",
    "response_schema": "JSON schema the replies are validated against and parsed into "
    "llm_parsed: written inline as YAML, or a JSON file's path (read as source is).",
}


class AttributeProblem(ConfigError):
    """An attribute of a component is unusable: ``FILE:LINE: attributes.FIELD: reason``."""


class JobComponent(dg.Component, dg.Resolvable):
    """A job declared in YAML; ``EnrichmentComponent`` and ``EmbeddingComponent`` are its kinds."""

    kind: ClassVar[Kind]
    factory: ClassVar[Callable[..., Enrichment]]  # the kind's: enrichment() or embedding()
    _models: ClassVar[dict[Kind, type[BaseModel]]] = {}

    def __init__(self, **attributes: Any) -> None:
        self.attributes: dict[str, Any] = attributes
        self.base_dir: Path | None = None
        self.where: Callable[[str], str] = lambda field: field

    @classmethod
    def model(cls) -> type[BaseModel]:
        if cls.kind not in cls._models:
            cls._models[cls.kind] = attributes_model(cls.kind)
        return cls._models[cls.kind]

    @classmethod
    def resolve_from_model(cls, context: dg.ResolutionContext, model: BaseModel) -> Self:
        """The attributes given, each template rendered; checked as ``maple enrich`` checks a
        job, each problem named by its file, line and attribute."""
        given = model.model_dump(exclude_unset=True)
        values = {name: context.at_path(name).resolve_value(value) for name, value in given.items()}
        component = cls(**values)
        tree = context.source_position_tree
        if tree is not None:
            component.base_dir = Path(tree.position.filename).parent

            def where(field: str) -> str:
                position = tree.lookup([*context.path, field]) or tree.lookup(context.path)
                return f"{position}: attributes.{field}" if position else f"attributes.{field}"

            component.where = where
        problems = component.problems()
        if problems:  # raised here: the one frame of ours under Dagster's "Stack Trace:"
            raise AttributeProblem("\n".join(problems))
        return component

    def check(self) -> None:
        """The job's checks, as the CLI runs them, every failure named against its attribute:
        one line each (``FILE:LINE: attributes.FIELD: reason``), all in one error."""
        problems = self.problems()
        if problems:
            raise AttributeProblem("\n".join(problems))

    def problems(self) -> list[str]:
        """What is wrong with the attributes, one line per problem, in the order ``maple
        enrich`` checks them; a check that needs an attribute found wrong is left out."""
        fields = self._spec_fields(self.options())
        problems: list[str] = []
        wrong: set[str] = set()
        try:
            spec = JobSpec(kind=self.kind, **fields)
        except ValidationError as exc:
            for error in exc.errors():
                problems.append(self._problem(_field_of(error, self.kind), error_message(error)))
                wrong.add(str(error["loc"][0]) if error["loc"] else TEMPLATE)
            if wrong & REQUIRED:
                return problems
            try:  # the other checks, over the attributes that passed (the others at default)
                spec = JobSpec(
                    kind=self.kind, **{k: v for k, v in fields.items() if k not in wrong}
                )
            except ValidationError:
                return problems
        for field, step in _CHECKS:
            if field in _NEEDS and _NEEDS[field] & wrong:
                continue
            try:
                step(spec)
            except ConfigError as exc:
                attribute = self.kind.template_field if field == TEMPLATE else keyword(field)
                problems.append(self._problem(attribute, str(exc)))
                wrong.add(field)
                if field == "provider":  # every later check asks the provider
                    break
        return problems

    def _problem(self, field: str, reason: str) -> str:
        return f"{self.where(field)}: {reason}"

    def options(self) -> dict[str, Any]:
        """The factory's keywords: the attributes, a relative path read from the YAML's folder."""
        options = dict(self.attributes)
        source = options.get("source")
        if isinstance(source, str) and _is_path(source):
            options["source"] = self._path(source, read=True)
        schema = options.get("response_schema")
        if isinstance(schema, str):
            options["response_schema"] = self._path(schema, read=True)
        if isinstance(options.get("output"), str):
            options["output"] = self._path(options["output"])
        if isinstance(options.get("blocking"), str):  # a template renders text
            options["blocking"] = options["blocking"].strip().lower() in ("true", "yes", "1")
        return options

    def _path(self, path: str, read: bool = False) -> str:
        """A relative path from the YAML's folder; a file to ``read`` that is not there, from
        the project's root (the nearest folder above with a ``pyproject.toml``) where it is
        there, as a user types it from the project root."""
        if is_remote(path) or Path(path).is_absolute() or self.base_dir is None:
            return path
        beside = self.base_dir / path
        if not read or beside.exists():
            return str(beside)
        root = next((d for d in beside.parents if (d / "pyproject.toml").is_file()), None)
        if root is not None and (root / path).exists():
            return str(root / path)
        return str(beside)  # missing: the input's check names it

    @staticmethod
    def _spec_fields(options: Mapping[str, Any]) -> dict[str, Any]:
        fields = {FIELDS.get(k, k): v for k, v in options.items() if k not in GRAPH_OPTIONS}
        source = fields.get("source")
        fields["source"] = source if isinstance(source, str) and _is_path(source) else None
        return fields

    def declare(self) -> Enrichment:
        """The job's asset graph, sensor and checks, from the kind's factory."""
        options = self.options()
        source = options.pop("source")
        if not _is_path(source):
            source = dg.AssetKey.from_user_string(source)
        try:
            return type(self).factory(source=source, **options)
        except ConfigError as exc:  # a check after the component's own: named, not placed
            raise AttributeProblem(f"{self.where('name')}: {exc}") from None

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        from maple_assets.wiring import maple_resources

        job = self.declare()
        return dg.Definitions(
            assets=job.assets,
            asset_checks=job.checks,
            sensors=job.sensors,
            resources=maple_resources([job]),
        )


def _is_path(source: str) -> bool:
    """A source naming a file (by its extension, as ``maple enrich`` reads one), else an asset."""
    return is_remote(source) or file_format(source, strict=False) is not None


def _field_of(error: Any, kind: Kind) -> str:
    """The attribute one error of a spec's validation is about (its template, for the kind's
    own check)."""
    loc = error["loc"]
    return keyword(str(loc[0])) if loc else kind.template_field


def _check_columns(spec: JobSpec) -> None:
    """A local file's header against the template, as ``maple enrich`` checks it first."""
    if spec.source is not None and not is_remote(spec.source):
        check_input_schema(input_schema(spec.source), spec)


TEMPLATE = "template"  # the kind's template field: prompt or text
# Attributes without a default: a check of the others needs them right.
REQUIRED = {"name", "source", "model", TEMPLATE, "prompt", "text"}
# A check left out when an attribute it reads was found wrong (the template's columns are
# looked up in the source file).
_NEEDS = {TEMPLATE: {"source"}}
# The declaration's checks that read one attribute each, in the order ``maple enrich`` runs
# them; ``enrichment()`` runs all of its own again as the component builds.
_CHECKS: tuple[tuple[str, Callable[[JobSpec], object]], ...] = (
    ("provider", lambda spec: capabilities(spec.provider)),
    ("source", validate_source),
    ("output", validate_output),
    (TEMPLATE, _check_columns),
    (
        "response_schema",
        lambda s: check_response_schema(s.response_schema, s.provider, "response_schema"),
    ),
    ("endpoint", check_endpoint),
    ("params", check_params),
    (
        "extra_body",
        lambda s: check_extra_body(
            s.provider,
            s.extra_body,
            takes_extra_body=capabilities(s.provider).takes_extra_body,
            control_fields=capabilities(s.provider).control_fields,
        ),
    ),
    ("deadline_s", check_deadline),
    ("retries", lambda s: job_policy(s.retries, s.params, s.check_images)),
)


class JobScaffolder(dg.Scaffolder[BaseModel]):
    """``dg scaffold defs maple_assets.EnrichmentComponent NAME``: a ``defs.yaml`` with the
    required attributes (``--source``, ``--prompt``/``--text``, ``--model`` fill them in, else
    placeholders to replace) and every other attribute commented out at its default, each with
    its help."""

    kind: ClassVar[Kind]

    @classmethod
    def get_scaffold_params(cls) -> type[BaseModel]:
        fields: dict[str, Any] = {
            field: (str | None, Field(default=None, description=option_help(field)))
            for field in ("source", cls.kind.template_field, "model")
        }
        return create_model(f"{cls.kind.name.capitalize()}ScaffoldParams", **fields)

    def scaffold(self, request: dg.ScaffoldRequest[BaseModel]) -> None:
        given = request.params.model_dump(exclude_none=True) if request.params else {}
        text = scaffold_yaml(request.type_name, self.kind, request.target_path.name, given)
        (request.target_path / "defs.yaml").write_text(text, encoding="utf-8")


PLACEHOLDERS = {
    "source": "path/to/table.parquet",
    "prompt": "Extract the brand from this item: {title}",
    "text": "{title}",
    "model": "gpt-4o-mini",
}


def scaffold_yaml(type_name: str, kind: Kind, folder: str, given: Mapping[str, str]) -> str:
    """The text of a scaffolded ``defs.yaml``: required attributes set, the others commented."""
    model = attributes_model(kind)
    name = folder if _usable_name(folder) else f"my_{kind.name}"
    values = {"name": name, **PLACEHOLDERS, **given}
    lines = [
        f"# {kind.job.capitalize()} on Maple: the assets NAME/input_shards, NAME/submissions,",
        "# NAME/raw_responses and NAME/merged, their sensor and checks. `dg check defs` checks",
        "# these attributes as `maple enrich` checks its options.",
        f"type: {type_name}",
        "",
        "attributes:",
    ]
    optional: list[str] = []
    for attribute in ("name", "source", kind.template_field, "model"):
        value = yaml.safe_dump({attribute: values[attribute]}, width=1000, sort_keys=False)
        lines += [*_comment(model.model_fields[attribute].description or ""), f"  {value.strip()}"]
    for attribute, info in model.model_fields.items():
        comment = _comment(info.description or "")
        if not info.is_required():
            default = (info.json_schema_extra or {}).get("default", info.default)  # type: ignore[union-attr]
            value = yaml.safe_dump({attribute: default}, width=1000, sort_keys=False).strip()
            optional += [*comment, f"  # {value}"]
    return "\n".join([*lines, "", "  # Optional, each at its default:", *optional, ""])


def _comment(help_text: str) -> list[str]:
    return [f"  # {line}" for line in textwrap.wrap(help_text, width=94)]


def _usable_name(name: str) -> bool:
    try:
        validate_name(name)
    except ConfigError:
        return False
    return True


class EnrichmentScaffolder(JobScaffolder):
    kind = CHAT


class EmbeddingScaffolder(JobScaffolder):
    kind = EMBEDDING


@dg.scaffold_with(EnrichmentScaffolder)
class EnrichmentComponent(JobComponent):
    """An LLM enrichment of a table: one prompt per row of source through a provider's batch
    API, the table with the answers as NAME/merged; the attributes are enrichment()'s keywords."""

    kind = CHAT
    factory = staticmethod(enrichment)


@dg.scaffold_with(EmbeddingScaffolder)
class EmbeddingComponent(JobComponent):
    """Embeddings of a table: one vector per row of source (llm_embedding) from a text template
    over its columns, as NAME/merged; the attributes are embedding()'s keywords."""

    kind = EMBEDDING
    factory = staticmethod(embedding)
