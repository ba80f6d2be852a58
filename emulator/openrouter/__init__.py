"""OpenRouter's inline batches, served by the OpenAI batch engine."""
