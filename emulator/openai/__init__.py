"""The OpenAI API: files, batches, chat completions, Responses, embeddings, admin reports."""
