"""Healing benchmarks (issue 38), each printing its figures:

- `python -m bench.healing.rollback_time`: seconds from a breaking image change to a verified rollback;
- `python -m bench.healing.soak`: rollbacks of valid generations while an old generation's Warning Events keep
  arriving (false rollbacks; the goal is 0).

Both start kubesim, the controller and a Celery worker with bench/converge's process harness (`harness.Stack`)
and stop them when they end. Not collected by pytest (its `testpaths` is `tests`).
"""
