"""`manage.py runcontroller [--cluster NAME [--context CTX]] [--adopt-identity] [--bootstrap] [--identity X]`: run the
controller of one cluster until SIGINT/SIGTERM.

With `--cluster NAME` (env OPSCONSOLE_CLUSTER; default `default`, the single cluster of an install that watches
one) it is that cluster's controller, reaching it through the kubeconfig context `--context CTX` (env
OPSCONSOLE_CLUSTER_CONTEXT; default: the process's own configuration). Before anything else it registers the
cluster (`reconcilers.engine.clusters.cluster_register`: the `Cluster` row, its identity — the kube-system
namespace's uid — recorded the first time and checked every later time, its server and context) and refuses to start
when the API server is another cluster than the one registered under NAME (unless `--adopt-identity` says the
cluster was rebuilt: the new identity is recorded, on the action record), or NAME was removed; one whose API server
does not answer within --api-timeout, or refuses its credentials (401), exits with an error naming the cluster, the
server and the status, having recorded the cluster unreachable (`cluster_unreachable`). Every key it
enqueues, every mirror row it writes and every sweep it runs is of its cluster only; while it leads it reports the
cluster's health on the row every OPSCONSOLE_CLUSTER_HEALTH_SECONDS (5). Workers serve every cluster: they reach
cluster NAME through the context recorded here (docs/operations.md, "Many clusters").

With `--bootstrap` it first waits for the Kubernetes API, applies `deploy/crds/*.yaml`, waits until each CRD is
served, then applies `deploy/samples/*.yaml` (create-if-missing). Those folders exist in a checkout only: installed
from the wheel it needs `--crds DIR --samples DIR` and says so (`controller_start.bootstrap_dirs`). With
`--install-crds` the CRDs are instead generated from the registered kinds and server-side applied (so a kind of the
user's own gets its CRD, and a changed model updates it); it works with or without `--bootstrap`. Then it campaigns
for the `opsconsole-controller` Lease and, while it leads, runs the informers of every registered reconciler and
feeds the workqueue. A clean exit (SIGINT/SIGTERM) stops the informers and releases the Lease, so a standby
controller takes over at once.

With `--shard ID` (env OPSCONSOLE_SHARD) it is one of several controller shards (reconcilers.engine.shards): it
holds the Lease `opsconsole-shard-ID` and reconciles only the keys the consistent-hash ring gives it among the live
shards (`--shard-by uid|namespace`), handing keys over when shards join or leave; the replica that also holds the
controller's Lease runs the cluster-wide work. With `--selector EXPR` (env OPSCONSOLE_SHARD_SELECTOR) it is a canary
shard: only the objects the label selector matches, which every other shard then leaves to it. Each shard lists and
watches only the reconciled objects labelled `shard.opsconsole.io/owner=<its id>`, which the replica running the
cluster-wide work keeps on every reconciled object (reconcilers.engine.shards.sharder; it needs patch rights on the
reconciled kinds); `--shard-informers all` (env OPSCONSOLE_SHARD_INFORMERS; default `labels`) has every shard list
and watch every object instead, writing no label.

A controller that does not lead is a hot standby (`--standby hot`, env OPSCONSOLE_STANDBY, the default): its
informers list and watch while it campaigns, writing and enqueueing nothing, so that on acquiring the Lease it
hands off only what changed and leaves the rest to the spread resync; `--standby cold` starts them on acquiring.

Settings read (all optional): OPSCONSOLE_LEADER_NAMESPACE ("default"), OPSCONSOLE_LEADER_LEASE_SECONDS (8),
OPSCONSOLE_LEADER_RENEW_DEADLINE_SECONDS (6), OPSCONSOLE_LEADER_RETRY_SECONDS (1), OPSCONSOLE_STANDBY ("hot"),
OPSCONSOLE_RESYNC_SECONDS (36000: each key is enqueued again once per 10 h, spread evenly over them; 0: never);
telemetry: OPSCONSOLE_CONTROLLER_METRICS_PORT (9102; 0 = no /metrics and no /healthz: `/healthz` there answers 503
while a supervised background thread is down, `opsconsole.telemetry.health`), OPSCONSOLE_METRICS_ADDR,
OPSCONSOLE_TRACING.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path
from types import FrameType
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.gcsettle import settle
from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check
from reconcilers.core.crd import crd_manifest
from reconcilers.engine import apiclient, kube, registry
from reconcilers.engine.clusters import (
    IDENTITY_NAMESPACE,
    ClusterRefused,
    HealthReporter,
    api_server,
    cluster_adopt,
    cluster_identity,
    cluster_register,
    cluster_unreachable,
)
from reconcilers.engine.controller import Controller
from reconcilers.engine.controller.bootstrap import BootstrapError, bootstrap, connect, install_crds
from reconcilers.engine.controller.standby import STANDBY_MODES
from reconcilers.engine.controller.wiring import build_controller, default_standby, leader_elector
from reconcilers.engine.metrics import LEADER_ELECTION_MASTER
from reconcilers.engine.shards.labels import INFORMER_MODES
from reconcilers.engine.shards.membership import shard_lease_name
from reconcilers.engine.shards.ownership import SHARD_BY
from reconcilers.engine.shards.selector import parse as parse_selector
from reconcilers.engine.shards.setup import Shard, build_shard
from reconcilers.management.controller_start import bootstrap_dirs, telemetry_start


class Command(BaseCommand):
    help = "Run the controller (informers feeding the workqueue) while it holds the leader Lease."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", default=os.environ.get("OPSCONSOLE_CLUSTER") or DEFAULT_CLUSTER,
                            help="the cluster this controller runs for (a DNS label; env OPSCONSOLE_CLUSTER; "
                                 "default 'default')")
        parser.add_argument("--context", default=os.environ.get("OPSCONSOLE_CLUSTER_CONTEXT") or "",
                            help="the kubeconfig context that reaches it (env OPSCONSOLE_CLUSTER_CONTEXT; default: "
                                 "the process's own configuration); the workers use the same context")
        parser.add_argument("--adopt-identity", action="store_true",
                            help="the cluster was rebuilt (or a sandbox started afresh): record its API server's "
                                 "identity as this cluster's where another is recorded (on the action record)")
        parser.add_argument("--bootstrap", action="store_true", help="apply CRDs and samples before starting")
        parser.add_argument("--install-crds", action="store_true",
                            help="apply the CRDs generated from the registered kinds before starting")
        parser.add_argument("--identity", default=None, help="leader election identity (default host_pid_rand)")
        parser.add_argument("--crds", type=Path, default=None,
                            help="CRD manifests (--bootstrap; default: the checkout's deploy/crds)")
        parser.add_argument("--samples", type=Path, default=None,
                            help="sample manifests (--bootstrap; default: the checkout's deploy/samples)")
        parser.add_argument("--api-timeout", type=float, default=60.0, help="seconds to wait for the API")
        parser.add_argument("--lease-duration", type=float, default=None,
                            help="seconds a standby waits after the leader's last renewal (default 8)")
        parser.add_argument("--renew-deadline", type=float, default=None,
                            help="seconds a leader that cannot renew keeps leading (default 6)")
        parser.add_argument("--retry-period", type=float, default=None,
                            help="seconds between Lease renewals and acquisition attempts (default 1)")
        parser.add_argument("--standby", choices=STANDBY_MODES, default=os.environ.get("OPSCONSOLE_STANDBY") or None,
                            help="hot (default): the informers list and watch while campaigning, so a takeover "
                                 "starts with warm caches; cold: they start on acquiring the Lease")
        parser.add_argument("--shard", default=os.environ.get("OPSCONSOLE_SHARD") or None,
                            help="run as this controller shard (its Lease opsconsole-shard-<id>): only the keys the "
                                 "ring gives it among the live shards (env OPSCONSOLE_SHARD)")
        parser.add_argument("--shard-by", choices=SHARD_BY, default=os.environ.get("OPSCONSOLE_SHARD_BY") or "uid",
                            help="what the ring hashes: the object's uid (default) or its namespace")
        parser.add_argument("--selector", default=os.environ.get("OPSCONSOLE_SHARD_SELECTOR") or None,
                            help="a canary shard: only the objects this label selector matches, which the other "
                                 "shards then leave to it (shard id 'canary' unless --shard)")
        parser.add_argument("--shard-informers", choices=INFORMER_MODES,
                            default=os.environ.get("OPSCONSOLE_SHARD_INFORMERS") or "labels",
                            help="labels (default): a shard lists and watches only the reconciled objects labelled "
                                 "with its id, which the elected replica keeps labelled; all: every reconciled "
                                 "object, no label written (env OPSCONSOLE_SHARD_INFORMERS)")

    def handle(self, *args: Any, **options: Any) -> None:
        controller: Controller | None = None
        shard: Shard | None = None

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if controller is None:
                raise KeyboardInterrupt  # still bootstrapping: nothing to release
            self.stderr.write(f"runcontroller: {signal.Signals(signum).name}, stopping")
            if shard is not None:
                shard.stepper.request_stop()  # before the controller releases the shard's Lease
            controller.request_stop()

        shard_id = options["shard"] or ("canary" if options["selector"] else None)
        cluster, context = options["cluster"], options["context"]
        try:  # a bad cluster name, shard id or selector is refused before anything starts
            cluster_name_check(cluster)
            if shard_id is not None:
                shard_lease_name(shard_id)
            if options["selector"] is not None:
                parse_selector(options["selector"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["bootstrap"]:  # a folder it cannot read is refused before it waits for the API
            options["crds"], options["samples"] = bootstrap_dirs(
                options["crds"], options["samples"], generated=options["install_crds"])
        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            reconcilers = registry.registered()
            generated = [crd_manifest(r) for r in reconcilers] if options["install_crds"] else None
            api = self._register(cluster, context, options["api_timeout"], adopt=options["adopt_identity"])
            if options["bootstrap"]:
                try:
                    report = bootstrap(api, options["crds"], options["samples"], generated=generated,
                                       api_timeout=options["api_timeout"])
                except BootstrapError as exc:
                    raise CommandError(str(exc)) from exc
                self.stdout.write(
                    f"bootstrap: {len(report.created)} created, {len(report.existing)} already there, "
                    f"{len(report.served)} CRDs served"
                )
            else:
                if generated is not None:
                    try:
                        served = install_crds(api, generated)
                    except BootstrapError as exc:
                        raise CommandError(str(exc)) from exc
                    self.stdout.write(f"install-crds: {len(served)} CRDs served")
            telemetry_start(self)
            durations = {"lease_duration": options["lease_duration"], "renew_deadline": options["renew_deadline"],
                         "retry_period": options["retry_period"]}
            if shard_id is not None:
                try:
                    shard = build_shard(api, reconcilers, shard_id, by=options["shard_by"],
                                        selector=options["selector"], identity=options["identity"],
                                        informers=options["shard_informers"],
                                        namespace=getattr(settings, "OPSCONSOLE_LEADER_NAMESPACE", "default"),
                                        background=True, cluster=cluster, **durations)
                except ValueError as exc:
                    raise CommandError(str(exc)) from exc
                controller, elector = shard.controller, shard.elector
                shard.start()
                self.stdout.write(f"runcontroller: shard {shard_id} by {options['shard_by']}"
                                  + (f", canary of {options['selector']}" if options["selector"] else "")
                                  + f", informers: {options['shard_informers']}")
            else:
                elector = leader_elector(api, options["identity"], **durations)
                controller = build_controller(api, reconcilers, elector=elector, background=True,
                                              standby=options["standby"] or default_standby(), cluster=cluster)
            informers = controller.parts.informers
            leads = shard.cluster if shard is not None else elector  # a shard: the one holding the controller Lease
            health = HealthReporter(api, cluster, identity=leads.identity, leading=lambda: leads.is_leader,
                                    listed_at=lambda: [i.listed_at for i in informers.informers.values()],
                                    last_events=lambda: [i.last_event for i in informers.informers.values()])
            health.start()
            LEADER_ELECTION_MASTER.labels(elector.name).set(1 if elector.is_leader else 0)
            kinds = ", ".join(r.resource.kind for r in reconcilers) or "nothing"
            # the start-up's objects out of the garbage collector's reach: full collections walk the caches only
            self.stdout.write(f"runcontroller: gc: {settle()} start-up objects frozen")
            self.stdout.write(f"runcontroller: {elector.identity} reconciling {kinds} in cluster {cluster}")
            self.stdout.flush()
            try:
                controller.run()  # returns after request_stop(), having released the Lease
            finally:
                health.stop()
                if shard is not None:
                    shard.stop()
            self.stdout.write("runcontroller: stopped")
        except KeyboardInterrupt:
            self.stderr.write("runcontroller: interrupted")
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _register(self, cluster: str, context: str, api_timeout: float, *, adopt: bool = False) -> Any:
        """The API client of `cluster` (through `context`), once its API answers, with the cluster registered
        (`cluster_register`); CommandError when it cannot be reached or may not run under this name."""
        def build() -> Any:
            if not context:
                return apiclient.get_api_client()
            return kube.build_api_client(apiclient.kubeconfig_configured(), context)

        try:
            api = connect(api_timeout, build=build)
        except BootstrapError as exc:
            self._unreachable(cluster, "", context)
            raise CommandError(f"cluster {cluster}: {exc}") from exc
        server = api_server(api)
        try:
            identity = cluster_identity(api)
            if adopt:
                self._adopt(cluster, identity, server)
            row = cluster_register(cluster, identity=identity, server=server, context=context)
        except kube.ApiException as exc:  # its credentials refused (401), or no right to read its identity (403)
            self._unreachable(cluster, server, context)
            whose = f"context {context}" if context else "its configuration"
            why = {401: f"the credentials of {whose} are not accepted",
                   403: f"{whose} may not read the {IDENTITY_NAMESPACE} namespace (its identity)"}.get(
                exc.status, f"the read of the {IDENTITY_NAMESPACE} namespace (its identity) failed")
            answer = f"answered {exc.status} {exc.reason}" if exc.status else f"failed: {exc.reason}"  # 0: TLS
            raise CommandError(f"cluster {cluster}: the API server at {server} {answer}: {why}") from None
        except (ClusterRefused, ValueError) as exc:
            raise CommandError(f"cluster {cluster}: {exc}") from exc
        self.stdout.write(f"runcontroller: cluster {row.name} (identity {row.identity}) at {row.server}"
                          + (f" through context {context}" if context else ""))
        return api

    def _adopt(self, cluster: str, identity: str, server: str) -> None:
        """`--adopt-identity`: the cluster's identity recorded afresh where another was, on the action record
        (`cluster.adopt`, the operating-system user, both identities)."""
        before = cluster_adopt(cluster, identity=identity)
        if before is None:
            return
        from opsconsole.accounts.action_records import action_record
        from opsconsole.accounts.management.commands.token import _actor

        action_record(action="cluster.adopt", method="CLI", path=f"manage.py runcontroller --cluster {cluster} "
                      "--adopt-identity", status_code=200, actor=_actor(), auth="command", target=f"cluster:{cluster}",
                      detail={"identity": identity, "before": before, "server": server}, cluster=cluster)
        self.stdout.write(f"runcontroller: cluster {cluster}: identity {identity} adopted in place of {before}")


    def _unreachable(self, cluster: str, server: str, context: str) -> None:
        """`cluster_unreachable`, on a best-effort basis: the database away too, the API server's error is the one
        to report."""
        try:
            cluster_unreachable(cluster, server=server, context=context)
        except Exception as exc:  # noqa: BLE001 - reported, and the start fails on the API server's error anyway
            self.stderr.write(f"runcontroller: cluster {cluster} not recorded unreachable: {exc}")
