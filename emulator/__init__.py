"""Local emulator of the providers' batch and real-time APIs (`maple emulator`): one folder per
provider, shared machinery in `core/`, assembled by `app.py`."""
