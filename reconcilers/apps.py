"""Django app configuration for the reconcile engine (its models and management commands).

The Celery app is the project's: `opsconsole.apps` creates it as Django starts, and the engine reaches it as
`celery.current_app`.
"""

from typing import Any

from django.apps import AppConfig


def ensure_default_cluster(using: str = "default", **_: Any) -> None:
    """The default cluster is registered (a `post_migrate` receiver, as the role groups are): migration 0020
    registers it, and so does every later `migrate` or `flush`, so an emptied database still names the cluster its
    single-cluster rows are in."""
    from reconcilers.core.clusters import DEFAULT_CLUSTER
    from reconcilers.models import Cluster

    Cluster.objects.using(using).get_or_create(name=DEFAULT_CLUSTER)


class ReconcilersConfig(AppConfig):
    """The engine's Django side: models, admin, management commands."""

    name = "reconcilers"
    label = "reconcilers"
    verbose_name = "Reconcilers"

    def ready(self) -> None:
        from django.db.models.signals import post_migrate

        post_migrate.connect(ensure_default_cluster, sender=self, dispatch_uid="opsconsole-default-cluster")
