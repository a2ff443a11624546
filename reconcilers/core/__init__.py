"""The engine's contracts: request/result types, errors, state machines and the reconciler base class.

Nothing in this package imports Django or Celery (an import-linter contract holds it to that).
"""
