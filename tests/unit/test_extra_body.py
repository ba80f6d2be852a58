"""Extra control-call fields (``--extra-body KEY=JSON``, ``extra_body=``): what is accepted,
what is refused in one line that never shows a value, which providers take them, and that a
job's spec keeps them out of what it stores."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from maple_assets.binding import job_decorations
from maple_engine.errors import ConfigError
from maple_engine.providers.extra_body import form_fields, parse_extra_body
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.providers.registry import build_provider
from maple_engine.spec import build_spec

SECRET = "gw-body-secret-3c1e"


def test_fields_are_read_from_key_json_strings_or_a_mapping() -> None:
    given_ = ['custom_llm_provider="azure"', "tries=3", 'tags={"a": [1, null]}', "x= true"]
    assert parse_extra_body(given_) == {
        "custom_llm_provider": "azure",
        "tries": 3,
        "tags": {"a": [1, None]},
        "x": True,
    }
    assert parse_extra_body(['a="b=c"']) == {"a": "b=c"}  # the first = splits
    assert parse_extra_body({"k": [1]}) == {"k": [1]}
    assert parse_extra_body(None) == {} == parse_extra_body(())


@pytest.mark.parametrize(
    ("given_", "says"),
    [
        ([SECRET], "--extra-body #1 has no '='"),
        (['a="1"', SECRET], "--extra-body #2 has no '='"),
        ([f"key={SECRET}"], "--extra-body key: the value after '=' is not JSON"),
        ([f'key="{SECRET}'], "--extra-body key: the value after '=' is not JSON"),
        ([f'=  "{SECRET}"'], "--extra-body key '' is not a field name"),
        ([f'a b="{SECRET}"'], "--extra-body key 'a b' is not a field name"),
        (['k="1"', f'k="{SECRET}"'], "--extra-body k is given twice"),
        (SECRET, "extra_body must map keys to JSON values"),
    ],
)
def test_a_malformed_field_is_one_line_naming_it_never_its_value(given_: object, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_extra_body(given_)
    message = str(caught.value)
    assert says in message and SECRET not in message and "\n" not in message


@given(st.dictionaries(st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), st.text()))
def test_a_string_field_goes_into_the_form_as_its_text(fields: dict[str, str]) -> None:
    assert form_fields(fields) == fields
    written = [f"{k}={json.dumps(v)}" for k, v in fields.items()]
    assert parse_extra_body(written) == fields


def test_other_values_go_into_the_form_as_json() -> None:
    assert form_fields({"n": 3, "o": {"a": None}, "s": "x"}) == {
        "n": "3",
        "o": '{"a":null}',
        "s": "x",
    }


def test_the_spec_keeps_fields_out_of_its_dump_repr_and_fingerprint() -> None:
    plain = build_spec(name="j", prompt="{t}", model="m")
    bodied = build_spec(name="j", prompt="{t}", model="m", extra_body=[f'key="{SECRET}"'])
    assert bodied.extra_body == {"key": SECRET}
    assert "extra_body" not in bodied.to_json() and SECRET not in repr(bodied)
    assert bodied.fingerprint() == plain.fingerprint()  # a rerun with other values resumes


def test_a_batch_api_with_files_and_batches_takes_fields_in_a_copy_that_shows_none() -> None:
    provider = OpenAIBatchProvider(api_key="k")
    decorations = job_decorations(provider, extra_body={"key": SECRET})
    bodied = provider.decorated(decorations)
    assert provider.extra_body == {} and bodied.extra_body == {"key": SECRET}
    assert bodied.decorated(job_decorations(provider, extra_body={"key": SECRET})) is bodied
    assert SECRET not in repr(bodied) + str(bodied.model_dump()) + repr(decorations)


def test_a_field_maple_sets_itself_is_refused_before_any_call() -> None:
    plain = OpenAIBatchProvider(api_key="k")
    with pytest.raises(ConfigError, match="--extra-body completion_window: Maple sets"):
        job_decorations(plain, extra_body={"completion_window": "1h"})


@pytest.mark.parametrize("name", ["anthropic", "gemini", "openai-realtime", "gemini-realtime"])
def test_a_provider_without_such_control_calls_refuses_fields(name: str, tmp_path: object) -> None:
    provider = build_provider(name, storage_root=str(tmp_path))
    assert provider.decorated(job_decorations(provider, extra_body={})) is provider
    with pytest.raises(ConfigError, match=f"--extra-body: {name} sends no control calls"):
        job_decorations(provider, extra_body={"key": SECRET})
