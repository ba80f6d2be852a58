"""The plain-text tables of ``maple costs`` and ``maple status``."""

from maple_assets.cli.tables import render


def test_header_rule_rows_rule_total_with_numbers_right_aligned() -> None:
    text = render(
        ["job", "requests", "cost_usd"],
        [["a", "5", "1.000000"], ["longer-job", "12,345", "0.250000"]],
        footer=["TOTAL", "12,350", "1.250000"],
    )
    lines = text.splitlines()
    assert lines[0].split() == ["job", "requests", "cost_usd"]
    assert set(lines[1]) == {"─"} and set(lines[4]) == {"─"}
    assert lines[2].split() == ["a", "5", "1.000000"]
    assert lines[-1].split() == ["TOTAL", "12,350", "1.250000"]
    assert len({len(line) for line in lines}) == 1  # numbers end at the same column
    assert lines[2].index("5") == lines[3].index("12,345") + len("12,345") - 1


def test_cells_are_text_not_markup_and_never_wrap() -> None:
    batch_ids = "[batch_1 batch_2] " + "x" * 300
    text = render(["shard", "batches"], [["s00000", batch_ids]], align="ll")
    row = text.splitlines()[2]
    assert row.split(None, 1) == ["s00000", batch_ids.strip()]
    assert "\x1b" not in text  # no colour codes, on a terminal or not
