"""The canary's sample: N rows spread evenly over the input, the same rows on every run."""

from hypothesis import given
from hypothesis import strategies as st

from maple_engine.canary import CanaryReport, sample_rows


def test_sample_rows_spread_over_the_input() -> None:
    assert sample_rows(100, 4) == [12, 37, 62, 87]
    assert sample_rows(3, 10) == [0, 1, 2]  # a small input: every row


@given(st.integers(1, 100_000), st.integers(1, 500))
def test_sample_rows_are_distinct_in_range_and_one_per_stretch(rows: int, n: int) -> None:
    ids = sample_rows(rows, n)
    assert ids == sorted(set(ids)) and len(ids) == min(rows, n)
    assert all(0 <= i < rows for i in ids)
    if n < rows:  # the i-th sampled row lies in the i-th of n equal stretches of the input
        assert all(k * rows // n <= i < -(-(k + 1) * rows // n) for k, i in enumerate(ids))


def test_a_failed_canary_is_one_line_with_the_top_failure_and_an_example() -> None:
    report = CanaryReport(
        fingerprint="f",
        run=1,
        asked=20,
        sample_size=20,
        succeeded=11,
        success_share=0.55,
        schema_valid_share=0.6,
        min_success=0.9,
        passed=False,
        top_failure="invalid_output",
        top_failure_rows=7,
        example_row=3,
        example_error="reply does not match the schema: 'brand' is a required property",
    )
    line = report.line()
    assert "\n" not in line
    assert line.startswith("canary failed: 11 of 20 rows succeeded, 60% of replies matched")
    assert "top failure invalid_output (7 rows), e.g. row 3: reply does not match" in line
