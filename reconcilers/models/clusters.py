"""`Cluster`: a registered Kubernetes cluster whose objects this database records.

A cluster is named (`reconcilers.core.clusters`); its identity is the uid of its `kube-system` namespace, which
the first controller that runs for it records and every later one checks, so a controller pointed at the wrong
API server under a registered name refuses to start instead of recording another cluster's objects as this one's.
`context` names the kubeconfig context the workers (and the controller, unless told otherwise) reach it through;
'' is the process's own configuration (in-cluster, or the kubeconfig's current context). The health fields are
written by the cluster's controller (leader, heartbeat, last list, watch lag, API errors); the console shows a
cluster whose heartbeat is old as unreachable and its objects as unknown since then. A removed cluster keeps its
rows and its history (`removed_at`).
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from reconcilers.core.clusters import DEFAULT_CLUSTER


class Cluster(models.Model):
    """One registered cluster: its name, how it is reached, what identifies it, its labels and its health."""

    name = models.CharField(max_length=63, unique=True, help_text="a DNS label; 'default' for a single-cluster install")
    server = models.CharField(max_length=1024, blank=True, help_text="the API server URL, as last connected")
    identity = models.CharField(max_length=64, blank=True,
                                help_text="the kube-system namespace's uid, recorded by the first controller")
    context = models.CharField(max_length=253, blank=True,
                               help_text="the kubeconfig context to reach it through; '' is the process's own")
    labels = models.JSONField(default=dict, blank=True, help_text="e.g. env=prod, region=eu-1")
    created_at = models.DateTimeField(default=timezone.now)
    removed_at = models.DateTimeField(null=True, blank=True, help_text="removed: no controller runs it, history stays")

    leader = models.CharField(max_length=255, blank=True, help_text="the controller replica leading it")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="the controller's last report")
    last_list_at = models.DateTimeField(null=True, blank=True, help_text="the controller's last complete list")
    watch_lag_seconds = models.FloatField(null=True, blank=True, help_text="age of the oldest undelivered event")
    api_requests = models.PositiveBigIntegerField(default=0, help_text="API requests in the last report's window")
    api_errors = models.PositiveBigIntegerField(default=0, help_text="of which failed")
    unreachable_since = models.DateTimeField(null=True, blank=True,
                                             help_text="when the controller last lost the API server")

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_default(self) -> bool:
        return self.name == DEFAULT_CLUSTER


def cluster_field(**kwargs: object) -> models.CharField:
    """The `cluster` column every mirrored and recorded row carries: the cluster's name, DEFAULT_CLUSTER for the
    rows of a single-cluster install (a database default, so adding it rewrites no append-only row)."""
    return models.CharField(max_length=63, default=DEFAULT_CLUSTER, db_default=DEFAULT_CLUSTER,
                            help_text="the cluster the object lives in", **kwargs)
