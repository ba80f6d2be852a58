"""Re-exports `resources.memory` (the storage resource tunes run workers with it too)."""

from resources.memory import tune_allocator

__all__ = ["tune_allocator"]
