"""Applications run jobs from Python: ``enrich``, ``submit`` (``jobs``), their ``Result`` and
``UsageError`` tree, and the in-process driver ``maple enrich`` shares with them."""
