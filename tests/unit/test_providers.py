"""Providers describe themselves: every ``--provider`` name builds a provider that fits the
``Provider`` protocol, its capabilities hang together, and nothing outside
``maple_engine/providers/`` names a provider or a provider class."""

import ast
import functools
import inspect
import re
import time
from pathlib import Path
from typing import Any

import pytest

from maple_engine.errors import ConfigError
from maple_engine.providers.base import BATCH_FILE_LIMITS, Lane, ProviderModel, Wire
from maple_engine.providers.registry import (
    BATCH_PROVIDERS,
    DEFAULT_PROVIDER,
    PROVIDERS,
    REALTIME_PROVIDERS,
    Built,
    build_provider,
    capabilities,
    known_capabilities,
)
from maple_engine.send.deadline_lanes import realtime_twin
from maple_engine.send.lane import RealtimeLane, lane_of

ROOT = Path(__file__).resolve().parents[2]
# Read, for each rule that differs by provider, from a built provider: they must agree with the
# capabilities its name is registered with.
READ_FROM_INSTANCES = ("mode", "queue", "dialect", "realtime_twin", "limits", "kinds")
SCANNED = ("maple_engine", "maple_assets", "resources", "partitions")
EXEMPT = (
    "maple_engine/providers/",  # the providers themselves
    "maple_assets/definitions.py",  # the example code location picks a provider by name
)


def built(name: str, tmp_path: Path) -> Built:
    return build_provider(name, emulator_url="http://127.0.0.1:1", storage_root=str(tmp_path))


def missing_members(protocol: type, obj: object) -> list[str]:
    """The members of ``protocol`` that ``obj`` lacks, or has but cannot call where the
    protocol declares a method."""
    members = [n for n in vars(protocol) if not n.startswith("_")]
    absent = [m for m in members if not hasattr(obj, m)]
    uncallable = [
        m
        for m in members
        if m not in absent
        and inspect.isfunction(vars(protocol).get(m))
        and not callable(getattr(obj, m))
    ]
    return absent + uncallable


@pytest.mark.parametrize("name", PROVIDERS)
def test_every_name_builds_a_provider_of_the_protocol(name: str, tmp_path: Path) -> None:
    """Every name builds a provider class, a `Wire`; what a job drives of it (a real-time
    provider through its lane) is a `Lane` whose wire is that provider."""
    provider = built(name, tmp_path)
    assert isinstance(provider, ProviderModel)
    lane = lane_of(provider)
    assert missing_members(Wire, provider) == []
    assert missing_members(Lane, lane) == []
    assert lane.wire is provider
    assert lane.wire.provider_name == name
    assert lane.wire.mode == capabilities(name).mode


def test_the_real_time_lane_declares_no_wire_member() -> None:
    """The lane holds its provider as ``wire`` rather than forwarding each wire member."""
    wire_members = {n for n in vars(Wire) if not n.startswith("_")}
    assert wire_members & set(vars(RealtimeLane)) == set()


@pytest.mark.parametrize("name", PROVIDERS)
def test_a_built_provider_agrees_with_its_name(name: str, tmp_path: Path) -> None:
    provider = built(name, tmp_path)
    by_name, by_class = capabilities(name), type(provider).capabilities
    for field in READ_FROM_INSTANCES:
        assert getattr(by_class, field) == getattr(by_name, field), field
    assert provider.limits() == by_name.limits  # the settings default to the capabilities


@pytest.mark.parametrize("name", PROVIDERS)
def test_capabilities_are_consistent(name: str) -> None:
    caps = capabilities(name)
    assert caps.kinds
    assert caps.price_families
    assert 0 < caps.limits.min_requests <= caps.limits.max_requests
    assert caps.limits.max_bytes > 0
    if caps.mode == "realtime":
        assert (caps.realtime_twin, caps.queue, caps.orphans) == (None, "none", "checkpoints")
    if caps.realtime_twin is not None:
        twin = capabilities(caps.realtime_twin)
        assert twin.mode == "realtime"
        assert twin.dialect == caps.dialect
        assert twin.price_families[0] == caps.price_families[0]
        assert caps.kinds <= twin.kinds


@pytest.mark.parametrize("name", BATCH_PROVIDERS)
def test_a_deadline_falls_back_on_the_twin_of_the_same_api(name: str, tmp_path: Path) -> None:
    batch: Any = built(name, tmp_path)
    twin_name = capabilities(name).realtime_twin
    if twin_name is None:
        with pytest.raises(ConfigError, match=f"{name} has none here"):
            realtime_twin(batch, str(tmp_path))
        return
    twin = realtime_twin(batch, str(tmp_path))
    assert (twin.wire.provider_name, twin.wire.mode) == (twin_name, "realtime")
    settings = twin.wire
    assert (settings.base_url, settings.api_key) == (batch.base_url, batch.api_key)
    assert settings.checkpoint_root == str(tmp_path)


def test_names_by_mode_and_default() -> None:
    assert (*BATCH_PROVIDERS, *REALTIME_PROVIDERS) == PROVIDERS
    assert capabilities(DEFAULT_PROVIDER).mode == "batch"
    assert capabilities(DEFAULT_PROVIDER).limits == BATCH_FILE_LIMITS
    assert known_capabilities("no-such-provider") is None
    with pytest.raises(ConfigError, match="Unknown provider 'no-such-provider'"):
        capabilities("no-such-provider")


def test_the_emulator_needs_its_url() -> None:
    with pytest.raises(ConfigError, match="emulator URL"):
        build_provider("emulator")


# -- no provider named outside the providers ------------------------------------------------


@functools.cache
def provider_classes() -> frozenset[type]:
    return frozenset(type(built(name, ROOT)) for name in PROVIDERS)


def provider_class_names() -> set[str]:
    """The provider classes' names. ``RealtimeProvider`` is not one of them: it is the real-time
    core's interface, which the sending stage drives (`maple_engine.send.lane`) as the job
    drives a `Lane`; what differs by provider stays behind it."""
    return {c.__name__ for c in provider_classes()}


def provider_folders() -> tuple[str, ...]:
    """``maple_engine.providers.<provider>.``: the packages only the providers import."""
    return tuple({c.__module__.rsplit(".", 1)[0] + "." for c in provider_classes()})


def docstrings(tree: ast.AST) -> set[int]:
    """Ids of the string constants that are docstrings (or other bare string statements)."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def names_a_provider(text: str) -> bool:
    """``text`` is a provider name, an identifier or path that starts with one, or the tail that
    tells some names apart (``-realtime``)."""
    text = text.strip()
    if text[:1] in ("-", "_") and any(name.endswith(text) for name in PROVIDERS):
        return True
    return re.split(r"[-_/:.]", text)[0] in PROVIDERS


def imported(node: ast.AST) -> list[str]:
    """What ``node`` imports from a provider's own package, or a provider class it imports."""
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        names = [node.module + "."] + [f"{node.module}.{a.name}" for a in node.names]
    elif isinstance(node, ast.Import):
        names = [alias.name + "." for alias in node.names]
    else:
        return []
    classes = provider_class_names()
    return [n for n in names if n.startswith(provider_folders()) or n.split(".")[-1] in classes]


def named(node: ast.AST, skip: set[int]) -> bool:
    """``node`` is a string (not a docstring) naming a provider or a provider class."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
        return False
    return names_a_provider(node.value) or node.value in provider_class_names()


def parsed(source: str) -> ast.Module:
    """``ast.parse``, tried again on CPython 3.11's "AST constructor recursion depth mismatch"
    (gh-106905: the converter's depth counter is shared with other threads converting at the
    same moment, such as a daemon thread a previous test left in this worker)."""
    for _ in range(4):
        try:
            return ast.parse(source)
        except SystemError:
            time.sleep(0.05)
    return ast.parse(source)


def leaks(source: str, where: str) -> list[str]:
    tree = parsed(source)
    skip = docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', 0)}"
        if named(node, skip):
            found.append(f"{line} names {ast.literal_eval(node)!r}")
        found += [f"{line} imports {module}" for module in imported(node)]
    return found


def test_nothing_outside_the_providers_names_a_provider() -> None:
    paths = [p for folder in SCANNED for p in sorted((ROOT / folder).rglob("*.py"))]
    where = [str(p.relative_to(ROOT)) for p in paths]
    problems = [
        leak
        for path, name in zip(paths, where, strict=True)
        if not name.startswith(EXEMPT)
        for leak in leaks(path.read_text(encoding="utf-8"), name)
    ]
    assert problems == []


def test_the_scan_finds_each_kind_of_leak() -> None:
    sample = (
        '"""A docstring may say openai."""\n'
        "from maple_engine.providers.openai.batch import OpenAIBatchProvider\n"
        "import maple_engine.providers.gemini.wire\n"
        'KIND = "AnthropicBatchProvider"\n'
        'NAME = "anthropic-realtime"\n'
        'FOLDER = "bedrock"\n'
        "from maple_engine.providers.openai.realtime import OpenAIRealtimeProvider\n"
        'realtime = "x".endswith("-realtime")\n'
        'message = f"{1} only for gemini"\n'
    )
    found = {line.split(" ", 1)[0] for line in leaks(sample, "sample.py")}
    assert found == {f"sample.py:{n}" for n in range(2, 9)}
