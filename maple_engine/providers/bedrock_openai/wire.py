"""Bedrock's runtime OpenAI API: where its calls go, how they authenticate, and where a batch's
input and results live. The request bodies, batch lines and answers are OpenAI's
(`maple_engine.providers.openai.wire`); what differs is here. AWS's pages:

- https://docs.aws.amazon.com/bedrock/latest/userguide/inference-openai-batch.html: OpenAI's
  Create/Retrieve/List/Cancel batch on the Bedrock Runtime endpoint, for Bedrock's OpenAI
  models. The input JSONL is uploaded to S3 beforehand (no Files API) and the create's
  ``input_file_id`` is its S3 URI; ``endpoint`` must be ``/v1/chat/completions``; the create
  carries the ``X-Amzn-Bedrock-RoleArn`` (the batch service role, which reads the input and
  writes the output) and ``X-Amzn-Bedrock-ModelId`` headers; the results and errors are
  written beside the input, ``{input folder}/{batch id}/{input name}.out`` and ``.err``.
- https://docs.aws.amazon.com/bedrock/latest/userguide/inference-chat-completions.html: the
  base URL is the Runtime endpoint with ``/openai/v1``
  (``https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1``), chat completions only.
- https://docs.aws.amazon.com/bedrock/latest/userguide/api-keys-use.html: a Bedrock API key is
  a bearer token; AWS's SDKs read it from ``AWS_BEARER_TOKEN_BEDROCK``.

Maple writes the input with the S3 credentials of its storage root (AWS's standard chain);
the API key authenticates the batch and chat calls.
"""

from maple_engine.errors import ConfigError
from maple_engine.settings import aws_environment

CREDENTIALS = "bedrock_openai"  # BEDROCK_OPENAI_BASE_URL
KEY_ENV = "AWS_BEARER_TOKEN_BEDROCK"
BASE_URL_ENV = "BEDROCK_OPENAI_BASE_URL"
ROLE_HEADER = "X-Amzn-Bedrock-RoleArn"
MODEL_HEADER = "X-Amzn-Bedrock-ModelId"
ENDPOINT = "/v1/chat/completions"
FOLDER = "bedrock-openai"  # the job's input objects: <job>/bedrock-openai/input/<stem>/...
REGION_ENVS = ("AWS_REGION", "AWS_DEFAULT_REGION")  # read by `aws_environment`


def runtime_url(region: str | None) -> str:
    """The Runtime endpoint's OpenAI prefix in ``region`` (else the AWS region variables'), the
    part before ``/batches`` and ``/chat/completions``; a `ConfigError` without a region."""
    region = region or aws_environment()["region_name"]
    if not region:
        raise ConfigError(
            f"{BASE_URL_ENV} is not set and no AWS region is: export AWS_REGION (e.g. "
            f"us-west-2) or {BASE_URL_ENV} (e.g. "
            "https://bedrock-runtime.us-west-2.amazonaws.com/openai/v1)."
        )
    return f"https://bedrock-runtime.{region}.amazonaws.com/openai/v1"


def result_uris(input_uri: str, batch_id: str) -> tuple[str, str]:
    """The S3 URIs of a batch's results and errors, beside its input ``input_uri``."""
    folder, _, name = input_uri.rpartition("/")
    return f"{folder}/{batch_id}/{name}.out", f"{folder}/{batch_id}/{name}.err"
