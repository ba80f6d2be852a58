"""One enrichment's Dagster graph: its assets, sensor, asset checks and the sensor's helpers."""
