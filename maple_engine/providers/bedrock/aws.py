"""The Bedrock control-plane calls the batch provider makes, through boto3's ``bedrock`` client.

The client comes from the standard AWS chain (credentials, region, ``AWS_ENDPOINT_URL_BEDROCK``)
with botocore's standard retry mode; errors become the platform's exception tree with the
operation named and no secrets.
"""

import itertools
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from maple_engine.errors import AuthError, ProviderError, SetupRefused
from maple_engine.providers.http import LOOKUP_DEPTH, names_the_setup

T = TypeVar("T")
LIST_PAGE = 100
log = logging.getLogger("maple.provider")
_AUTH = {"AccessDeniedException", "UnrecognizedClientException", "ExpiredTokenException"}


class BedrockCalls:
    def __init__(
        self, region: str | None, max_retries: int, headers: Mapping[str, str] | None = None
    ) -> None:
        import boto3  # ~0.3 s to import: only when a Bedrock job runs, not with every command
        from botocore.config import Config

        config = Config(retries={"max_attempts": max_retries + 1, "mode": "standard"})
        self.client: Any = boto3.client("bedrock", region_name=region, config=config)
        if headers:  # a gateway's, on every call (added before the request is signed)
            extra = dict(headers)

            def add_headers(request: Any, **_: Any) -> None:
                for name, value in extra.items():
                    request.headers[name] = value

            self.client.meta.events.register("before-sign.bedrock", add_headers)

    def _call(self, what: str, call: Callable[[], T]) -> T:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return call()
        except ClientError as exc:
            error = exc.response.get("Error", {})
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))
            detail = f"Bedrock {what} failed: {error.get('Code')}: {error.get('Message')}"
            if error.get("Code") in _AUTH or status in {401, 403}:
                raise AuthError(f"{detail}. Check the AWS credentials.", status) from exc
            if status in {400, 422} and names_the_setup(str(error.get("Message") or "")):
                # a gateway's "header ... required": every call would get it, no row is at fault
                raise SetupRefused(f"{detail}: fix what it names, then rerun.", status) from exc
            raise ProviderError(detail, status) from exc
        except BotoCoreError as exc:
            raise ProviderError(f"Bedrock {what} failed: {exc}") from exc

    def create(self, **request: Any) -> str:
        """The new job's ARN. After an answer that leaves open whether the job was made (a 5xx
        or a lost connection, once boto3's retries with the same ``clientRequestToken`` are
        spent), the job is looked up by its name and token before the error is raised."""
        name = request["jobName"]
        try:
            answer = self._call(
                f"CreateModelInvocationJob {name}",
                lambda: self.client.create_model_invocation_job(**request),
            )
        except ProviderError as exc:
            if isinstance(exc, AuthError) or (exc.status and exc.status < 500):  # refused
                raise
            for job in itertools.islice(self.jobs(name_contains=name), LOOKUP_DEPTH):
                token = job.get("clientRequestToken")
                if job.get("jobName") == name and token in (None, request["clientRequestToken"]):
                    log.warning(
                        "Bedrock CreateModelInvocationJob %s failed (%s), but the job was made "
                        "(%s): not sent again", name, exc, job["jobArn"],
                    )  # fmt: skip
                    return str(job["jobArn"])
            raise
        return str(answer["jobArn"])

    def get(self, arn: str) -> dict[str, Any]:
        answer: dict[str, Any] = self._call(
            f"GetModelInvocationJob {arn}",
            lambda: self.client.get_model_invocation_job(jobIdentifier=arn),
        )
        return answer

    def stop(self, arn: str) -> None:
        self._call(
            f"StopModelInvocationJob {arn}",
            lambda: self.client.stop_model_invocation_job(jobIdentifier=arn),
        )

    def jobs(self, name_contains: str | None = None) -> Iterator[dict[str, Any]]:
        """Every batch inference job (newest first), optionally those whose name contains a text."""
        token: str | None = None
        while True:
            params: dict[str, Any] = {"maxResults": LIST_PAGE, "sortOrder": "Descending"}
            if name_contains:
                params["nameContains"] = name_contains
            if token:
                params["nextToken"] = token
            page = self._call(
                "ListModelInvocationJobs",
                lambda p=params: self.client.list_model_invocation_jobs(**p),  # type: ignore[misc]
            )
            yield from page.get("invocationJobSummaries") or []
            token = page.get("nextToken")
            if not token:
                return
