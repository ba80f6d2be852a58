"""Provider classes as Dagster resources: the same fields as resource config (shown in the UI,
secrets as ``dg.EnvVar``), the provider's connections closed when the run ends."""

import functools
from typing import Any

import dagster as dg

from maple_engine.providers.base import ProviderModel, Wire


@functools.cache
def resource_class(provider_class: type[ProviderModel]) -> type[dg.ConfigurableResource]:  # type: ignore[type-arg]
    """``provider_class`` as a Dagster resource class (one class per provider class)."""

    def teardown_after_execution(self: Any, context: dg.InitResourceContext) -> None:
        self.close()

    namespace = {
        "__module__": __name__,
        "__doc__": provider_class.__doc__,
        "teardown_after_execution": teardown_after_execution,
    }
    bases = (dg.ConfigurableResource, provider_class)
    return type(provider_class.__name__ + "Resource", bases, namespace)


def provider_resource(provider: Wire, **config: Any) -> dg.ConfigurableResource:  # type: ignore[type-arg]
    """An engine provider as a Dagster resource with the same settings, plus ``config``
    (e.g. ``api_key=dg.EnvVar("OPENAI_API_KEY")``)."""
    if not isinstance(provider, ProviderModel):
        raise TypeError(f"{provider.provider_name}: a provider resource needs a ProviderModel")
    fields = {name: getattr(provider, name) for name in provider.model_fields_set}
    return resource_class(type(provider))(**(fields | config))
