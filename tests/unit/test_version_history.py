"""input_shards links each earlier version's runs (filtered by ``maple/job`` and
``maple/version``), newest first, ten of them and then every run of the job."""

from urllib.parse import parse_qs, urlsplit

from maple_assets.graph.history import earlier_versions, runs_link


def test_the_first_version_has_no_earlier_one() -> None:
    assert earlier_versions("tags", 1) == {}


def test_each_earlier_version_links_its_runs_by_tag() -> None:
    shown = earlier_versions("rye-bread", 3)["earlier_versions"].value
    assert shown.splitlines()[0].startswith("- [version 2:")
    link = runs_link("rye-bread", 1)
    assert link in shown.splitlines()[1]
    assert parse_qs(urlsplit(link).query) == {
        "q[]": ["tag:maple/job=rye-bread", "tag:maple/version=1"]
    }


def test_a_long_history_links_ten_versions_then_every_run() -> None:
    lines = earlier_versions("tags", 25)["earlier_versions"].value.splitlines()
    assert len(lines) == 11 and "version 15:" in lines[9]
    assert lines[-1].endswith(f"({runs_link('tags')})")
