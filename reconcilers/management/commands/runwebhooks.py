"""`manage.py runwebhooks`: serve the registered kinds' admission webhooks over TLS (opsconsole.webhooks).

Certificates come from `--cert`/`--key` (a mounted Secret in deploy/k8s), or are made in `--cert-dir` (default:
`<data dir>/webhooks`): a CA kept across restarts and a serving certificate for `--name` and 127.0.0.1. Print the
configurations with that CA by `manage.py webhooks --ca-bundle <cert-dir>/webhook-ca.pem`. A generated serving
certificate is made again within 30 days of its expiry, and a certificate file that changes (a rotated Secret) is
loaded again, both without a restart or a dropped request (`--reload-interval`). `--client-ca FILE` requires API
servers to present a certificate signed by it (mutual TLS). SIGTERM stops it after the decisions handed to the
recorder are written.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from opsconsole.webhooks.server import CertificateReloader, WebhookServer, tls_context
from opsconsole.webhooks.tls import DEFAULT_NAMES, ensure_certificates


class Command(BaseCommand):
    """Serve AdmissionReviews until SIGTERM or SIGINT."""

    help = "Serve the admission webhooks of the registered kinds over TLS."

    def add_arguments(self, parser: CommandParser) -> None:
        """Address, certificates, mutual TLS."""
        parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=9443, help="port (default 9443; 0 picks a free one)")
        parser.add_argument("--cert", help="serving certificate (PEM); with --key, nothing is generated")
        parser.add_argument("--key", help="its private key (PEM)")
        parser.add_argument("--cert-dir", help="where generated certificates live (default <data dir>/webhooks)")
        parser.add_argument("--name", action="append", default=None,
                            help="a DNS name the generated certificate covers (repeatable; default the "
                                 "deploy/k8s Service's names and localhost)")
        parser.add_argument("--client-ca", help="require API server client certificates signed by this CA")
        parser.add_argument("--reload-interval", type=float, default=60.0,
                            help="seconds between looks for a renewed certificate (default 60)")

    def handle(self, *args: Any, **options: Any) -> None:
        """Start the server and wait for a signal."""
        renew = None
        if options.get("cert") and options.get("key"):
            cert, key = options["cert"], options["key"]
        else:
            directory = options.get("cert_dir") or Path(settings.DATA_DIR) / "webhooks"
            names = tuple(options.get("name") or DEFAULT_NAMES)
            files = ensure_certificates(directory, names)
            cert, key = str(files.cert), str(files.key)
            self.stdout.write(f"webhook CA: {files.ca_cert}")

            def renew() -> None:  # a serving certificate within 30 days of expiry is made again (same CA)
                ensure_certificates(directory, names)

        context = tls_context(cert, key, options.get("client_ca"))
        server = WebhookServer(context, options["host"], options["port"])
        reloader = CertificateReloader(context, cert, key, interval=options["reload_interval"], renew=renew)
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        port = server.start()
        reloader.start()
        self.stdout.write(f"serving admission webhooks on https://{options['host']}:{port}")
        self.stdout.flush()
        try:
            stop.wait()
        finally:
            reloader.stop()
            server.stop()
