"""Extra headers (``--header``, ``headers=``): what is accepted, what is refused in one line
that never shows a value, and that a job's spec keeps them out of what it stores."""

import pytest

from maple_assets.binding import job_decorations
from maple_engine.errors import ConfigError
from maple_engine.providers.headers import parse_headers
from maple_engine.providers.openai.batch import OpenAIBatchProvider
from maple_engine.spec import build_spec

SECRET = "sk-gw-0d9e8c7b"


def test_headers_are_read_from_name_value_strings_or_a_mapping() -> None:
    given = ["x-portkey-provider: openai", f"Authorization:Bearer {SECRET} "]
    assert parse_headers(given) == {
        "x-portkey-provider": "openai",
        "Authorization": f"Bearer {SECRET}",
    }
    assert parse_headers({"x-a": "b:c"}) == {"x-a": "b:c"}
    assert parse_headers(None) == {} == parse_headers(())


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ([f"x-key {SECRET}"], "--header #1 has no colon"),
        (["x-a: 1", f"{SECRET}"], "--header #2 has no colon"),
        ([f": {SECRET}"], "A header has an empty name"),
        ([f"x key: {SECRET}"], "Header name 'x key' is not a valid HTTP header name"),
        ([f"x-ké: {SECRET}"], "is not a valid HTTP header name"),
        ({"x-a": f"{SECRET}\r\nx-b: 1"}, "Header x-a: its value holds a line break"),
        ({"x-a": 5}, "Header x-a: its value must be a string"),
        (["x-a: 1", "X-A: 2"], "Header X-A is given twice"),
    ],
)
def test_a_malformed_header_is_one_line_naming_it_never_its_value(given: object, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_headers(given)
    message = str(caught.value)
    assert says in message and SECRET not in message and "\n" not in message


def test_the_spec_keeps_headers_out_of_its_dump_repr_and_fingerprint() -> None:
    plain = build_spec(name="j", prompt="{t}", model="m")
    headed = build_spec(name="j", prompt="{t}", model="m", headers=[f"x-gw: {SECRET}"])
    assert headed.headers == {"x-gw": SECRET}
    assert "headers" not in headed.to_json() and SECRET not in repr(headed)
    assert headed.fingerprint() == plain.fingerprint()  # a rerun with other values resumes
    with pytest.raises(ConfigError, match="--header #1 has no colon"):
        build_spec(name="j", prompt="{t}", model="m", headers=[SECRET])


def test_a_provider_with_headers_is_a_copy_that_shows_and_dumps_none_of_them() -> None:
    provider = OpenAIBatchProvider(api_key="k")
    decorations = job_decorations(provider, headers={"x-gw": SECRET})
    headed = provider.decorated(decorations)
    assert provider.extra_headers == {} and headed.extra_headers == {"x-gw": SECRET}
    assert headed.decorated(job_decorations(provider, headers={"x-gw": SECRET})) is headed
    assert SECRET not in repr(headed) + str(headed.model_dump()) + repr(decorations)
