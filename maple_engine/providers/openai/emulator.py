"""``--provider emulator``: OpenAI's Batch API on the local emulator, which serves any model.

Its prices are OpenAI's, then Anthropic's, and a model neither knows is priced as gpt-4o-mini, so
emulator runs show realistic costs.
"""

import dataclasses
from typing import Any

from maple_engine.errors import ConfigError
from maple_engine.providers.openai.batch import CAPABILITIES as OPENAI
from maple_engine.providers.openai.batch import OpenAIBatchProvider

NAME = "emulator"
CAPABILITIES = dataclasses.replace(
    OPENAI,
    price_families=("openai", "anthropic"),
    price_fallback_model="gpt-4o-mini",
    runs_on_emulator=True,
    credentials=None,  # the emulator takes any key
    family=NAME,
    results_retention_s=None,  # the emulator keeps its batches while it runs
    billing_report=None,  # its admin reports are OpenAI's (``maple reconcile --provider openai``)
)


def on_emulator(emulator_url: str | None, **overrides: Any) -> OpenAIBatchProvider:
    """OpenAI's batch provider pointed at the emulator at ``emulator_url``."""
    if emulator_url is None:
        raise ConfigError(f"provider {NAME!r} needs a running emulator URL")
    return OpenAIBatchProvider(
        name=NAME, base_url=f"{emulator_url}/v1", api_key="emulator", **overrides
    )
