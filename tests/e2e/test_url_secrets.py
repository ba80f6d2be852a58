"""Secrets in a base URL, as ``maple enrich`` meets them: a user name and password, or a key in
the query string, are refused before anything is sent (exit 2, one line), and the line shows the
URL with each secret as ``***`` (with ``--debug`` too); no other credential is used silently."""

from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from emulator.config import EmulatorConfig
from emulator.server import EmulatorServer
from maple_assets.cli.commands import main
from maple_engine.providers.http import masked_url

SECRET = "pw-very-secret"
USER_INFO = (f"user:{SECRET}@", "", "http://***@127.0.0.1:", "a user name or password")
QUERY = ("", f"?api-key={SECRET}", "/v1?api-key=***", "a query string")


MODELS = {
    "openai": "gpt-4o-mini",
    "openai-realtime": "gpt-4o-mini",
    "mistral": "mistral-small-latest",
}


@pytest.mark.parametrize("provider", list(MODELS))
@pytest.mark.parametrize("secret", [USER_INFO, QUERY], ids=["user-info", "query"])
@pytest.mark.parametrize("debug", [(), ("--debug",)], ids=["plain", "debug"])
def test_a_secret_in_the_base_url_is_refused_masked_before_anything_is_sent(
    tmp_path: Path, provider: str, secret: tuple[str, str, str, str], debug: tuple[str, ...]
) -> None:
    user, query, shown, says = secret
    table = tmp_path / "items.parquet"
    pl.DataFrame({"title": ["a", "b"]}).write_parquet(table)
    family = "MISTRAL" if provider == "mistral" else "OPENAI"
    with EmulatorServer(EmulatorConfig(batch_seconds=0)) as server:
        url = server.url.replace("http://", f"http://{user}") + "/v1" + query
        env = {f"{family}_BASE_URL": url, f"{family}_API_KEY": "sk-x", "MAPLE_COST_DB": None}
        args = ["enrich", str(table), "--prompt", "About {title}", "--model", MODELS[provider]]
        args += ["--provider", provider, "--storage", str(tmp_path / "store"), "--quiet", *debug]
        result = CliRunner().invoke(main, args, env=env)
        stats = server.stats()
    assert result.exit_code == 2, result.output
    assert SECRET not in result.output
    assert says in result.output and shown in result.output, result.output
    assert stats["files_uploaded"] == stats["requests_received"] == 0


def test_masked_url_hides_user_info_and_every_query_value() -> None:
    shown = masked_url("https://u:p@h.example:8443/v1?a=1&key=s")
    assert shown == "https://***@h.example:8443/v1?a=***&key=***"
    assert masked_url("http://h/v1") == "http://h/v1"
