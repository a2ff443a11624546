"""Benchmarks of kubesim (see ``bench/kubesim/run.py``)."""
