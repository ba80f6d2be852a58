"""A job's call decorations: built and checked in one place, shown without their secrets."""

import threading

import pytest

from maple_engine.errors import ConfigError
from maple_engine.providers.attribution import EMPTY, parse_attribution
from maple_engine.providers.decorations import NO_DECORATIONS, CallDecorations, decorations_for

SECRET = "gw-secret-123"
TEAMS = parse_attribution('{"teams": {"catalog": {"openai_project": "proj_cat"}}}')


def test_the_repr_shows_how_many_not_what() -> None:
    decorations = CallDecorations({"x-gw": SECRET}, {"key": SECRET}, sending=threading.Event())
    shown = repr(decorations) + str(decorations)
    assert SECRET not in shown and "x-gw" not in shown and "key" not in shown
    assert shown.startswith("CallDecorations(headers=1, extra_body=1")


def test_extra_fields_are_refused_where_the_provider_takes_none() -> None:
    with pytest.raises(ConfigError, match="--extra-body: anthropic sends no control calls"):
        decorations_for("anthropic", takes_extra_body=False, attribution=EMPTY, extra_body={"k": 1})
    none = decorations_for("anthropic", takes_extra_body=False, attribution=EMPTY, extra_body={})
    assert none == NO_DECORATIONS


def test_the_team_project_header_yields_to_a_given_one() -> None:
    team = decorations_for("openai", takes_extra_body=True, attribution=TEAMS, team="catalog")
    assert team.headers_for("project-header") == {"OpenAI-Project": "proj_cat"}
    assert team.headers_for(None) == {}  # an API that takes no project header
    given = decorations_for(
        "openai",
        takes_extra_body=True,
        attribution=TEAMS,
        headers={"openai-project": "mine"},
        team="catalog",
    )
    assert given.headers_for("project-header") == {"openai-project": "mine"}


def test_the_early_start_event_does_not_make_decorations_differ() -> None:
    told = decorations_for(
        "x", takes_extra_body=False, attribution=EMPTY, sending=threading.Event()
    )
    assert told == NO_DECORATIONS and told.sending is not None
