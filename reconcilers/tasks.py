"""The Celery task that runs one reconcile: it takes the key and calls the drain (its key, then the waiting ones).

Tasks are sent by name (`reconcilers.reconcile`) by `reconcilers.engine.dispatch`, never with an ETA.
"""

from celery import shared_task

from reconcilers.engine import drain


@shared_task(name="reconcilers.reconcile", ignore_result=True)
def reconcile(key: str, only_if_queued: bool = False) -> str:
    """Reconcile the object named by `key` (`group/version/plural/namespace/name`) once (`only_if_queued`:
    only if the workqueue still has it queued, as for every task the engine sends), then the keys the workqueue
    holds ready for a worker (`drain.drain_ready`)."""
    return drain.run_and_drain(key, only_if_queued=only_if_queued)
