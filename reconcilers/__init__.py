"""The reconcile engine and the built-in reconcilers.

`reconcilers.core` holds the contracts (no Django, no Celery); `reconcilers.engine` the queue, runner,
controller and audit recording; `reconcilers.kinds` the built-in reconcilers.
"""
