"""Local emulator of the OpenAI and Anthropic batch and real-time APIs (`maple emulator`)."""
