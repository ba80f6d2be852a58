"""The job's input: streaming readers, prompt templates, token estimates and the checks run
before anything is sent."""
