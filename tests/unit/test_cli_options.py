"""Click options generated from pydantic fields: names, types, bounds, choices, flags."""

from typing import Any, Literal

import click
from click.testing import CliRunner
from pydantic import BaseModel, Field

from maple_assets.cli.options import model_options


class Example(BaseModel):
    mode: Literal["fast", "slow"] = Field(default="fast", description="How.")
    share: float = Field(default=0.5, gt=0, le=1, description="A share.")
    count: int | None = Field(default=None, ge=1, description="How many.")
    check: bool = Field(default=True, description="Check first.")
    tags: tuple[str, ...] = Field(default=(), description="Repeatable.")
    needed: str = Field(description="Required.")


@click.command()
@model_options(Example)
def show(**values: Any) -> None:
    click.echo(repr(sorted(values.items())))


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(show, list(args))


def test_defaults_and_values_reach_the_command() -> None:
    defaults = {"mode": "fast", "share": 0.5, "count": None, "check": True, "tags": ()}
    assert run("--needed", "x").output.strip() == repr(sorted({**defaults, "needed": "x"}.items()))
    given = run("--needed", "x", "--mode", "slow", "--no-check", "--tags", "a", "--tags", "b")
    assert "('check', False)" in given.output and "('tags', ('a', 'b'))" in given.output
    assert "('mode', 'slow')" in given.output


def test_bounds_choices_and_required_are_usage_errors() -> None:
    for args in (["--share", "0"], ["--share", "1.5"], ["--count", "0"], ["--mode", "odd"], []):
        result = run(*(["--needed", "x"] if args else []), *args)
        assert result.exit_code == 2, args
    assert "Missing option '--needed'" in run().output


def test_help_is_the_fields_description() -> None:
    help_text = run("--help").output
    for text in ("How.", "A share.", "How many.", "Check first.", "Repeatable.", "Required."):
        assert text in help_text
