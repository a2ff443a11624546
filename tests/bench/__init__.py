"""Tests of the benchmarks under bench/."""
