"""Prometheus metrics of what the console shows: `lockconsole metrics`."""
