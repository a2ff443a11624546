"""`manage.py reconcile <kind> <namespace>/<name> --reason "…" [--wait]`: a manual reconcile from the shell.

Another cluster's object: `--cluster NAME` (a registered cluster, reached through its context), or the object's
workqueue key alone (`manage.py reconcile prod/cache.example.com/v1alpha1/memcacheds/shop/web`; five parts: the
default cluster's). A cluster this process cannot reach (not registered, removed, no context) is refused before
anything is written, never answered by the default cluster's same-named object.

It goes through `reconcile_request_create`, the same path the API uses (a ReconcileRequest row, the
`opsconsole.io/reconcile-requested-at` annotation, an immediate enqueue). With `--wait` it follows the
request until it succeeded or failed and prints its lifecycle; the exit status is 1 when it failed or did
not finish within `--timeout` seconds.
"""

from __future__ import annotations

import dataclasses
import getpass
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check
from reconcilers.core.types import Request
from reconcilers.engine import apiclient, kube, registry
from reconcilers.management.naming import named_request
from reconcilers.models import ReconcileRequest, RequestState
from reconcilers.services.reconcile_requests import ReconcileRequestError, reconcile_request_create


class Command(BaseCommand):
    help = "Ask for a reconcile of one object now (annotation + immediate enqueue + a ReconcileRequest row)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("kind", help="the kind: Memcached, memcached, memcacheds or memcacheds.cache.example.com; "
                                         "or the object's key ([cluster/]group/version/plural/namespace/name) alone")
        parser.add_argument("target", nargs="?", default=None,
                            help="<namespace>/<name>, or <name> for a cluster-scoped kind")
        parser.add_argument("--cluster", default=None,
                            help=f"the object's cluster (default {DEFAULT_CLUSTER!r}, or the key's)")
        parser.add_argument("--reason", default="", help="why (kept with the request)")
        parser.add_argument("--actor", default=None, help="who asks (default: user:<login name>)")
        parser.add_argument("--idempotency-key", default=None)
        parser.add_argument("--wait", action="store_true", help="follow the request until it finished")
        parser.add_argument("--timeout", type=float, default=120.0, help="seconds --wait waits (default 120)")
        parser.add_argument("--interval", type=float, default=0.2, help="seconds between polls (default 0.2)")

    def handle(self, *args: Any, **options: Any) -> None:
        req = self._request(options["kind"], options["target"], options["cluster"])
        kind = registry.for_key(req.key()).resource
        namespace, name = req.namespace, req.name
        shown = req.namespaced_name + ("" if req.cluster == DEFAULT_CLUSTER else f" in cluster {req.cluster}")
        try:
            api = apiclient.get_api_client(req.cluster)  # one this process cannot reach: refused, nothing written
        except apiclient.UnknownCluster as exc:
            raise CommandError(str(exc)) from exc
        actor = options["actor"] or f"user:{getpass.getuser()}"
        try:
            request = reconcile_request_create(req.key(), actor=actor, reason=options["reason"],
                                               idempotency_key=options["idempotency_key"])
        except ReconcileRequestError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"requested   {request.requested_at.isoformat()}  {kind.kind} {shown}  "
                          f"request {request.pk}  token {request.token}  by {request.actor}")
        if not options["wait"]:
            return
        finished = self._follow(request, options["timeout"], options["interval"])
        live = kube.get_object(api, kind, namespace or None, name)
        handled = ((live or {}).get("status") or {}).get("lastHandledReconcileAt")
        if handled:
            self.stdout.write(f"status      lastHandledReconcileAt {handled}  phase "
                              f"{(live.get('status') or {}).get('phase', '')}")
        if finished is None:
            raise CommandError(f"request {request.pk} did not finish within {options['timeout']:g}s")
        if finished.state == RequestState.FAILED:
            raise CommandError(f"request {request.pk} failed: {finished.error}")

    @staticmethod
    def _request(kind_or_key: str, target: str | None, cluster: str | None) -> Request:
        """The object's Request: from a kind and `<namespace>/<name>` (in `cluster`, default the default one), or
        from a workqueue key alone (its cluster its prefix's; a --cluster naming another is refused)."""
        if cluster is not None:
            try:
                cluster_name_check(cluster)
            except ValueError as exc:
                raise CommandError(f"--cluster: {exc}") from exc
        if target is None:
            try:
                req = Request.from_key(kind_or_key)
                registry.for_key(req.key())
            except (ValueError, registry.UnknownKind) as exc:
                raise CommandError(f"give <kind> <namespace>/<name>, or an object's key: {exc}") from exc
            if cluster is not None and cluster != req.cluster:
                raise CommandError(f"--cluster {cluster} but the key names cluster {req.cluster}")
            return req
        return dataclasses.replace(named_request(kind_or_key, target), cluster=cluster or DEFAULT_CLUSTER)

    def _follow(self, request: ReconcileRequest, timeout: float, interval: float) -> ReconcileRequest | None:
        deadline = time.monotonic() + timeout
        shown: set[str] = set()
        while True:
            current = ReconcileRequest.objects.select_related("run", "transition").get(pk=request.pk)
            if current.picked_up_at and "picked_up" not in shown:
                shown.add("picked_up")
                delay = (current.picked_up_at - current.requested_at).total_seconds()
                self.stdout.write(f"picked up   {current.picked_up_at.isoformat()}  (+{delay:.3f}s)")
            if current.state in (RequestState.SUCCEEDED, RequestState.FAILED):
                took = (current.finished_at - current.requested_at).total_seconds() if current.finished_at else 0.0
                run = current.run
                detail = "no run"
                if run is not None:
                    detail = f"run {run.pk} {run.result} on {run.worker} in {run.duration_seconds:.3f}s"
                if current.transition is not None:
                    t = current.transition
                    detail += f"; transition {t.from_phase or '(none)'} -> {t.to_phase}"
                when = current.finished_at.isoformat() if current.finished_at else ""
                self.stdout.write(f"{current.state:<11} {when}  (+{took:.3f}s)  {detail}")
                if current.error:
                    self.stdout.write(f"error       {current.error}")
                return current
            if time.monotonic() >= deadline:
                self.stdout.write(f"waiting     still {current.state} after {timeout:g}s")
                return None
            time.sleep(interval)
