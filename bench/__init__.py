"""Benchmarks: runnable measurements of opsconsole's parts (`python -m bench.<name>`), results in docs/benchmarks.md."""
