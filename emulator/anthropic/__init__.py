"""The Anthropic API: Messages, Message Batches, admin reports."""
