"""The API a chat job sends to (``--endpoint``) and the model parameters that API and model
take, checked before anything is uploaded: a parameter the provider would refuse fails every
row at the provider, after the upload, and each refused row may be billed for its attempt.

- ``--endpoint responses`` needs a provider that serves OpenAI's Responses API
  (``ProviderCapabilities.endpoints``);
- the parameters fit the provider's own rules (``ProviderCapabilities.rules``: each provider's
  ``params.py`` says what its API refuses, e.g. a parameter spelled for another API, a reasoning
  parameter on a model that does not reason, a thinking budget out of range).
"""

from maple_engine.errors import ConfigError
from maple_engine.providers.registry import capabilities, one_of
from maple_engine.providers.rules import API_NAMES, ChatParams
from maple_engine.spec import JobSpec


def check_api_params(spec: JobSpec) -> None:
    """The provider serves the job's API, and the parameters fit the API and the model."""
    check_endpoint(spec)
    check_params(spec)


def check_endpoint(spec: JobSpec) -> None:
    """The provider serves the job's API (``--endpoint``)."""
    if "endpoint" not in spec.kind.options:  # a kind with no reply (an embedding)
        return
    able = capabilities(spec.provider)
    if spec.endpoint not in able.endpoints:
        raise ConfigError(
            f"--endpoint {spec.endpoint}: provider {spec.provider!r} does not serve "
            f"{API_NAMES[spec.endpoint]}; use --endpoint chat (the default), or "
            f"--provider {one_of(lambda c: spec.endpoint in c.endpoints)}."
        )


def check_params(spec: JobSpec) -> None:
    """The parameters (``--param``) fit the provider's API and the model."""
    if "endpoint" not in spec.kind.options:
        return
    able = capabilities(spec.provider)
    asked = ChatParams(spec.model, spec.endpoint, spec.params, able.reasoning_models)
    able.rules.check_params(asked)
