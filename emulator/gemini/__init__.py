"""The Gemini API: files, batches, generateContent and embeddings."""
