"""Tests of telemetry: metrics endpoints, Prometheus read-back, traces stored in the span table."""
