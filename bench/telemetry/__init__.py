"""Benchmark: reconcile throughput with telemetry fully on versus off."""
