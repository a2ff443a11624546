"""`manage.py runwebhooks`: serve the registered kinds' admission webhooks over TLS (opsconsole.webhooks).

Certificates come from `--cert`/`--key` (a mounted Secret in deploy/kustomize), or are made in `--cert-dir` (default:
`<data dir>/webhooks`): a CA kept across restarts and a serving certificate for `--name` and 127.0.0.1. Print the
configurations with that CA by `manage.py webhooks --ca-bundle <cert-dir>/webhook-ca.pem`. A generated serving
certificate is made again within 30 days of its expiry, and a certificate file that changes (a rotated Secret) is
loaded again, both without a restart or a dropped request (`--reload-interval`).

Mutual TLS always: only a caller presenting a client certificate signed by the client CA (the API server) is
served. `--client-ca FILE` names that CA (deploy/kustomize: a Secret); with generated certificates and no `--client-ca`,
a client CA and the API server's client certificate are made in the same directory (`webhook-client-ca.pem`,
`webhook-client.pem`, `webhook-client-key.pem`: kubesim's `--webhook-client-cert/-key`, or a kube-apiserver's
admission kubeconfig). With `--cert`/`--key` and no `--client-ca` it refuses to start; only
`--insecure-skip-client-verify` (logged loudly) runs it open to anyone. `/metrics` and `/healthz` are plain HTTP on
`--metrics-host`:`--metrics-port` (9444; -1: none), so Prometheus and probes need no client certificate.
Connections are bounded (`--max-connections`, `--header-timeout`, `--keepalive-timeout`).
`--install` (the sandbox mode `make run` uses) writes
the webhook configurations into the cluster once it listens (and the conversion webhook of every kind with several
versions into its CRD), puts back what goes missing every `--recheck-interval` seconds, and deletes the
configurations on exit (opsconsole.webhooks.install).
One server per cluster: `--cluster NAME` (env `OPSCONSOLE_CLUSTER`, default `default`) names the cluster whose
API server calls it; its decisions go on record under that cluster and the writes it admits are noted for the
engine on that cluster's lists (reconcilers.engine.admitted), never credited to the same-named object of another.
SIGTERM stops it after the decisions handed to the recorder are written; a decision it answered before a SIGKILL
waits in Redis for the next server (opsconsole.webhooks.recorder).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.webhooks.connections import Limits
from opsconsole.webhooks.install import Keeper, install, uninstall
from opsconsole.webhooks.server import INSECURE_WARNING, CertificateReloader, WebhookServer, tls_context
from opsconsole.webhooks.tls import DEFAULT_NAMES, ensure_certificates, ensure_client_certificates
from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check
from reconcilers.engine.controller.bootstrap import connect


class Command(BaseCommand):
    """Serve AdmissionReviews until SIGTERM or SIGINT."""

    help = "Serve the admission webhooks of the registered kinds over TLS."

    def add_arguments(self, parser: CommandParser) -> None:
        """Address, certificates, mutual TLS."""
        parser.add_argument("--cluster", default=os.environ.get("OPSCONSOLE_CLUSTER") or DEFAULT_CLUSTER,
                            help="the cluster whose API server calls this server (default OPSCONSOLE_CLUSTER, else "
                                 f"{DEFAULT_CLUSTER!r})")
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=9443, help="port (default 9443; 0 picks a free one)")
        parser.add_argument("--cert", help="serving certificate (PEM); with --key, nothing is generated")
        parser.add_argument("--key", help="its private key (PEM)")
        parser.add_argument("--cert-dir", help="where generated certificates live (default <data dir>/webhooks)")
        parser.add_argument("--name", action="append", default=None,
                            help="a DNS name the generated certificate covers (repeatable; default the "
                                 "deploy/kustomize Service's names and localhost)")
        parser.add_argument("--client-ca", help="the CA of the API server's client certificate (mutual TLS; default "
                                                 "with generated certificates: one made in --cert-dir)")
        parser.add_argument("--insecure-skip-client-verify", action="store_true",
                            help="serve callers without a client certificate: anyone who reaches the port can then "
                                 "write the action record (never in production)")
        parser.add_argument("--metrics-host", default=None,
                            help="address of the plain-HTTP /metrics and /healthz (default OPSCONSOLE_METRICS_ADDR)")
        parser.add_argument("--metrics-port", type=int, default=9444,
                            help="port of /metrics and /healthz (default 9444; 0 picks a free one; -1: none)")
        parser.add_argument("--max-connections", type=int, default=Limits.max_connections,
                            help=f"connections at once (default {Limits.max_connections}; one more evicts the "
                                 "oldest idle one)")
        parser.add_argument("--header-timeout", type=float, default=Limits.header_timeout,
                            help=f"seconds for a request's head, and for its body (default {Limits.header_timeout})")
        parser.add_argument("--keepalive-timeout", type=float, default=Limits.keepalive_timeout,
                            help=f"seconds an idle connection is kept (default {Limits.keepalive_timeout})")
        parser.add_argument("--install", action="store_true",
                            help="the sandbox mode of `make run`: once listening, write the webhook configurations "
                                 "(this server's URL and CA, failurePolicy Ignore) into the cluster; delete them "
                                 "on exit")
        parser.add_argument("--advertise-url",
                            help="with --install: the base URL the API server reaches this server at (default "
                                 "https://127.0.0.1:<port>, or --host's address)")
        parser.add_argument("--api-timeout", type=float, default=60.0,
                            help="with --install: seconds to wait for the cluster's API (default 60)")
        parser.add_argument("--recheck-interval", type=float, default=5.0,
                            help="with --install: seconds between looks that put back missing wiring (default 5)")
        parser.add_argument("--reload-interval", type=float, default=60.0,
                            help="seconds between looks for a renewed certificate (default 60)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Start the server and wait for a signal."""
        try:
            cluster = cluster_name_check(options["cluster"])
        except ValueError as exc:
            raise CommandError(f"--cluster: {exc}") from exc
        renew = None
        ca_file = ""
        client_ca = options.get("client_ca")
        insecure = bool(options.get("insecure_skip_client_verify"))
        if options.get("cert") and options.get("key"):
            cert, key = options["cert"], options["key"]
            if not client_ca and not insecure:
                raise CommandError("--client-ca is required with --cert/--key: without a client CA anyone who "
                                   "reaches the port can write the action record (--insecure-skip-client-verify "
                                   "to run so anyway)")
        else:
            directory = options.get("cert_dir") or Path(settings.DATA_DIR) / "webhooks"
            names = tuple(options.get("name") or DEFAULT_NAMES)
            files = ensure_certificates(directory, names)
            cert, key, ca_file = str(files.cert), str(files.key), str(files.ca_cert)
            self.stdout.write(f"webhook CA: {files.ca_cert}")
            if not client_ca and not insecure:
                client = ensure_client_certificates(directory)
                client_ca = str(client.ca_cert)
                self.stdout.write(f"webhook client CA: {client.ca_cert}; the API server's client certificate: "
                                  f"{client.cert} (key {client.key})")

            def renew() -> None:  # a serving certificate within 30 days of expiry is made again (same CA)
                ensure_certificates(directory, names)

        if insecure:
            client_ca = None
            self.stderr.write(f"WARNING: {INSECURE_WARNING}")
        context = tls_context(cert, key, client_ca)
        limits = Limits(max_connections=options["max_connections"], header_timeout=options["header_timeout"],
                        read_timeout=options["header_timeout"], keepalive_timeout=options["keepalive_timeout"])
        metrics_port = options["metrics_port"] if options["metrics_port"] >= 0 else None
        server = WebhookServer(context, options["host"], options["port"], insecure=insecure, limits=limits,
                               metrics_host=options.get("metrics_host") or settings.OPSCONSOLE_METRICS_ADDR,
                               metrics_port=metrics_port, cluster=cluster)
        reloader = CertificateReloader(context, cert, key, interval=options["reload_interval"], renew=renew,
                                       client_ca=client_ca)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        port = server.start()
        reloader.start()
        self.stdout.write(f"serving admission webhooks on https://{options['host']}:{port}"
                          f"{' (client certificates required)' if client_ca else ''} for cluster {cluster}")
        if server.metrics_port is not None:
            self.stdout.write(f"metrics and health on http://{server.metrics_host}:{server.metrics_port}")
        api = None
        keeper: Keeper | None = None
        if options["install"]:
            api = connect(options["api_timeout"])  # make run starts us together with kubesim
            host = "127.0.0.1" if options["host"] in ("0.0.0.0", "") else options["host"]
            ca = Path(ca_file).read_bytes() if ca_file else Path(cert).read_bytes()
            url = (options.get("advertise_url") or f"https://{host}:{port}").rstrip("/")
            keeper = Keeper(api, url, ca, options["recheck_interval"])
            install(api, keeper.url, ca)
            keeper.start()
            self.stdout.write("webhook configurations installed in the cluster (failurePolicy Ignore)")
        self.stdout.flush()
        try:
            stop.wait()
        finally:
            if keeper is not None:
                keeper.stop()
            if api is not None:
                try:
                    uninstall(api)
                except Exception as exc:  # noqa: BLE001 - a cluster gone first must not keep us from stopping
                    self.stderr.write(f"webhook configurations not removed: {exc}")
            reloader.stop()
            server.stop()
