"""Every registered ``--provider`` name is held to the suite: it has a case row (or a reason in
`NO_CASE`), and a name that embeds has an embedding model in its row, so no promise is skipped
without saying so."""

from maple_engine.providers.registry import PROVIDERS, capabilities
from tests.conformance.cases import CASES, NO_CASE


def test_every_registered_name_has_a_case_row_or_a_reason_for_none() -> None:
    rows = [case.provider for case in CASES if case.variant is None]
    assert len(rows) == len(set(rows)), "a name has two case rows"
    assert len({case.id for case in CASES}) == len(CASES), "two case rows have one id"
    assert set(rows).isdisjoint(NO_CASE), "a name has a case row and a reason for none"
    missing = set(PROVIDERS) - set(rows) - set(NO_CASE)
    assert not missing, f"add a case row to tests/conformance/cases.py for {sorted(missing)}"
    assert set(rows) | set(NO_CASE) <= set(PROVIDERS), "a row names no registered provider"


def test_a_name_that_embeds_has_an_embedding_model_and_one_that_does_not_has_none() -> None:
    wrong = [
        case.provider
        for case in CASES
        if ("embedding" in {str(k) for k in capabilities(case.provider).kinds})
        != (case.embed_model is not None)
    ]
    assert not wrong, f"embed_model disagrees with the registry's kinds for {wrong}"


def test_only_a_name_that_takes_no_key_skips_the_key_promises() -> None:
    keyless = {case.provider for case in CASES if case.key is None}
    assert keyless == {
        case.provider for case in CASES if capabilities(case.provider).runs_on_emulator
    }
