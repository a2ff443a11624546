"""bench/memory: bytes per managed object in the controller (python -m bench.memory; see __main__.py)."""
