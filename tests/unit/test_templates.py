import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from maple_engine.errors import ConfigError
from maple_engine.inputs.templates import (
    Placeholder,
    check_columns,
    parse_template,
    render_expr,
    template_columns,
)


def render(template: str, frame: pl.DataFrame) -> list[str]:
    return frame.select(render_expr(parse_template(template)).alias("r"))["r"].to_list()


def test_placeholders_and_escapes() -> None:
    parts = parse_template("Brand of {title} {{not a column}} / {desc}")
    assert parts == ["Brand of ", Placeholder("title"), " {not a column} / ", Placeholder("desc")]
    assert template_columns(parts) == ["title", "desc"]


def test_nulls_render_as_empty_and_numbers_as_text() -> None:
    frame = pl.DataFrame({"title": ["a", None], "n": [1, 2]})
    assert render("{title}|{n}", frame) == ["a|1", "|2"]


def test_column_names_with_spaces() -> None:
    assert render("<{product name}>", pl.DataFrame({"product name": ["x"]})) == ["<x>"]


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{title", "without its closing"),
        ("title}", "lone '}'"),
        ("{}", "empty placeholder"),
        ("{a{b}", "without its closing"),
    ],
)
def test_malformed_templates_are_named(template: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_template(template)


def test_missing_column_lists_the_available_ones() -> None:
    with pytest.raises(ConfigError, match=r"\['titel'\].*Available columns: \['title', 'sku'\]"):
        check_columns(parse_template("{titel}"), ["title", "sku"])


@given(
    st.text(
        alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="{}"), max_size=40
    )
)
def test_text_without_braces_renders_verbatim(text: str) -> None:
    assert render(text, pl.DataFrame({"x": [1]})) == [text]


@given(
    st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=30)
)  # no lone surrogates: not UTF-8
def test_escaped_text_round_trips(text: str) -> None:
    escaped = text.replace("{", "{{").replace("}", "}}")
    assert render(escaped, pl.DataFrame({"x": [1]})) == [text]
