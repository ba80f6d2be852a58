"""Azure OpenAI: its paths, served by the OpenAI routes."""
