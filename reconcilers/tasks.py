"""The Celery task that runs one reconcile: it takes the key and calls the runner, nothing else.

Tasks are sent by name (`reconcilers.reconcile`) by `reconcilers.engine.dispatch`, never with an ETA.
"""

from celery import shared_task

from reconcilers.engine import runner


@shared_task(name="reconcilers.reconcile", ignore_result=True)
def reconcile(key: str, only_if_queued: bool = False) -> str:
    """Reconcile the object named by `key` (`group/version/plural/namespace/name`) once (`only_if_queued`:
    only if the workqueue still has it queued, as for every task the engine sends), then the keys the workqueue
    holds ready for a worker (`runner.drain_ready`)."""
    return runner.run(key, only_if_queued=only_if_queued, drain=True)
