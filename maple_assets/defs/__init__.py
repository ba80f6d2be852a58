"""The code location's components: one folder each with a ``defs.yaml``."""
