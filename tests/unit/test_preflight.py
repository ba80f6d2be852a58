"""Pre-flight checks that need no server: settings, schemas, templates, locations, errors."""

import os
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from maple_assets import enrichment
from maple_assets.cli.errors import STOPPED, USAGE, fail, outcome_code, user_error
from maple_engine.errors import ConfigError
from maple_engine.inputs.checks import check_context_window, check_input_schema
from maple_engine.inputs.schema_checks import check_response_schema
from maple_engine.inputs.templates import parse_template, render_expr
from maple_engine.merge.merge import write_merged
from maple_engine.model import ROW_ID
from maple_engine.policy import check_retries, parse_retry_options
from maple_engine.spec import JobSpec, parse_param, validate_paths
from maple_engine.storage.probe import check_writable

STRICT = {
    "type": "object",
    "properties": {"brand": {"type": "string"}, "tags": {"type": "array", "items": {}}},
    "required": ["brand", "tags"],
    "additionalProperties": False,
}


def test_param_values_are_json_and_a_bad_one_shows_the_quoting() -> None:
    assert parse_param("temperature=0.2") == ("temperature", 0.2)
    assert parse_param('stop=["END"]') == ("stop", ["END"])
    with pytest.raises(ConfigError, match=r"""quote a string: --param 'temperature="\{bad"'"""):
        parse_param("temperature={bad")
    with pytest.raises(ConfigError, match="expected NAME=VALUE"):
        parse_param("temperature")


def test_retry_counts_cannot_be_negative() -> None:
    assert parse_retry_options(["refused=0", "expired=unlimited"]) == {"refused": 0, "expired": -1}
    with pytest.raises(ConfigError, match="cannot be negative"):
        parse_retry_options(["server_error=-1"])
    with pytest.raises(ConfigError, match="not valid"):
        check_retries({"server_error": -5})
    with pytest.raises(ConfigError, match="not valid"):
        enrichment("j", dg.AssetKey("t"), "{a}", "gpt-4o-mini", retries={"refused": -2})


@pytest.mark.parametrize(
    ("schema", "provider", "message"),
    [
        ({"type": "object", "properties": {"a": {"type": "strng"}}}, "openai", "not a valid JSON"),
        ({"type": "array", "items": {}}, "openai", "the root must be an object"),
        ({**STRICT, "additionalProperties": True}, "openai", "additionalProperties"),
        ({**STRICT, "required": ["brand"]}, "openai", r"missing \['tags'\]"),
        ({**STRICT, "allOf": [{}]}, "emulator", r"uses \['allOf'\]"),
        (
            {**STRICT, "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"]},
            "anthropic",
            r"uses \['minimum'\]",
        ),
    ],
)
def test_response_schema_must_be_valid_and_fit_the_provider(
    schema: dict[str, Any], provider: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        check_response_schema(schema, provider, "--response-schema s.json")


def test_strict_schemas_pass_and_anthropic_allows_optional_properties() -> None:
    check_response_schema(STRICT, "openai", "x")
    check_response_schema({**STRICT, "required": ["brand"]}, "anthropic", "x")


def test_list_columns_render_as_json_only_when_asked() -> None:
    frame = pl.DataFrame({"t": ["a"], "tags": [["x", 'y"']], "s": [{"k": 1}]})
    spec = JobSpec(name="j", prompt="{t} {tags}", model="gpt-4o-mini")
    with pytest.raises(ConfigError, match=r"write \{tags:json\}"):
        check_input_schema(frame.schema, spec)
    parts = parse_template("{t} {tags:json} {s:json}")
    rendered = frame.select(render_expr(parts).alias("r"))["r"].item()
    assert rendered == 'a ["x","y\\""] {"k":1}'


def test_csv_output_cannot_hold_nested_columns() -> None:
    frame = pl.DataFrame({"t": ["a"], "tags": [["x"]]})
    spec = JobSpec(name="j", prompt="{t}", model="m", source="in.parquet", output="out.csv")
    with pytest.raises(ConfigError, match=r"\['tags'\] hold list"):
        check_input_schema(frame.schema, spec)
    check_input_schema(frame.schema, JobSpec(name="j", prompt="{t}", model="m", output="o.pq"))


def test_a_row_over_the_context_window_is_named() -> None:
    spec = JobSpec(name="j", prompt="{t}", model="gpt-4o-mini", params={"max_tokens": 1000})
    frame = pl.DataFrame({ROW_ID: [0, 1, 2], "t": ["short", "x" * 520_000, "y"]})
    with pytest.raises(ConfigError, match=r"Row 1 renders a request of about 131,00\d tokens"):
        check_context_window(frame, spec)
    check_context_window(frame.filter(pl.col(ROW_ID) != 1), spec)


def test_job_names_fit_a_file_name() -> None:
    with pytest.raises(ConfigError, match="300 bytes long"):
        enrichment("a" * 300, dg.AssetKey("t"), "{a}", "gpt-4o-mini")


@pytest.mark.parametrize("link", ["symlink_to", "hardlink_to"])
def test_an_output_that_is_the_input_under_another_name_is_refused(
    tmp_path: Path, link: str
) -> None:
    """A link to the input (either way round, symbolic or hard, or through a linked folder)
    is the input: writing the output there would destroy it."""
    target = tmp_path / "data" / "in.csv"
    target.parent.mkdir()
    target.write_text("title\nx\n")
    alias = tmp_path / "alias.csv"
    getattr(alias, link)(target)
    folder = tmp_path / "folder"
    folder.symlink_to(target.parent)

    def spec(source: Path, output: Path) -> JobSpec:
        return JobSpec(
            name="j", prompt="{title}", model="m", source=str(source), output=str(output)
        )

    for source, output in ((alias, target), (target, alias), (folder / "in.csv", target)):
        with pytest.raises(ConfigError, match="is the input file: writing it would destroy"):
            validate_paths(spec(source, output))
    validate_paths(spec(alias, tmp_path / "out.csv"))
    assert target.read_text() == "title\nx\n"


def test_unwritable_locations(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        check_writable(str(blocker / "store"), "The storage root", folder=True)
    with pytest.raises(ConfigError, match="is a folder"):
        check_writable(str(tmp_path), "--output", folder=False)
    with pytest.raises(ConfigError, match="not writable"):
        check_writable("/proc/maple-store", "The storage root", folder=True)
    check_writable(str(tmp_path / "new" / "deeper"), "The storage root", folder=True)
    assert sorted(os.listdir(tmp_path)) == ["file"]  # probes leave nothing, create nothing


def test_user_errors_are_found_inside_dagster_failures() -> None:
    @dg.asset
    def broken() -> None:
        raise ConfigError("the input is ragged at row 3")

    with pytest.raises(Exception) as caught:
        dg.materialize([broken], instance=dg.DagsterInstance.ephemeral())
    found = user_error(caught.value)
    assert isinstance(found, ConfigError) and "row 3" in str(found)


def test_fail_prints_one_line_and_exits_with_the_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        fail(ConfigError("bad\nthing"), debug=False)
    assert exited.value.code == USAGE
    assert capsys.readouterr().err == "error: bad thing\n"
    with pytest.raises(SystemExit) as exited:
        fail(RuntimeError("boom"), debug=False)
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unexpected RuntimeError: boom" in err and "--debug" in err
    try:
        raise RuntimeError("boom")
    except RuntimeError as exc:
        with pytest.raises(SystemExit):
            fail(exc, debug=True)
    assert "Traceback" in capsys.readouterr().err


def test_outcome_codes() -> None:
    assert outcome_code({"failed": 0}, None) == 0
    assert outcome_code({"failed": 2}, None) == 3
    assert outcome_code({"failed": 2}, {"kind": "budget", "reason": "r"}) == STOPPED


def test_parquet_output_keeps_the_input_types(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    typed = pa.table(
        {
            "s": pa.array(["a", "b"], pa.string()),
            "l": pa.array([[1], [2]], pa.list_(pa.int32())),
            "d": pa.array(["x", "y"]).dictionary_encode(),
        }
    )
    pq.write_table(typed, source)
    frame = pl.read_parquet(source).with_columns(pl.lit("r").alias("llm_response"))
    out = tmp_path / "out.parquet"
    write_merged(iter([frame]), str(out), "parquet", str(source))
    schema = pq.read_schema(out)
    assert schema.field("s").type == pa.string()
    assert schema.field("l").type == pa.list_(pa.int32())
    assert schema.field("d").type == pa.dictionary(pa.int32(), pa.string())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet", "out.parquet"]


def test_concurrent_writers_of_one_path_never_share_a_temporary_file(tmp_path: Path) -> None:
    from maple_engine.merge.merge import OutputWriter

    out = str(tmp_path / "out.parquet")
    first, second = OutputWriter(out, "parquet"), OutputWriter(out, "parquet")
    with first, second:  # both open at once, as two jobs writing the same --output would be
        first.write(pl.DataFrame({"n": [1, 1]}))
        second.write(pl.DataFrame({"n": [2, 2, 2]}))
    assert pl.read_parquet(out)["n"].to_list() in ([1, 1], [2, 2, 2])  # whole, not mixed
    assert os.listdir(tmp_path) == ["out.parquet"]
