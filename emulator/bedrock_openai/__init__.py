"""Bedrock's runtime OpenAI API: OpenAI's batches with the input and output in S3."""
