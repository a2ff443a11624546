"""Mutual TLS for tests of the webhook server: its serving certificate and the API server's client certificate
made in one directory, a server that requires the latter, and client contexts with and without it."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opsconsole.webhooks.server import WebhookServer, tls_context
from opsconsole.webhooks.tls import (
    ClientCertificates,
    WebhookCertificates,
    ensure_certificates,
    ensure_client_certificates,
)


@dataclass(frozen=True)
class Mtls:
    """The serving certificates and the client certificates of one test server."""

    serving: WebhookCertificates
    client: ClientCertificates

    def server_context(self) -> ssl.SSLContext:
        return tls_context(str(self.serving.cert), str(self.serving.key), str(self.client.ca_cert))

    def client_context(self, with_certificate: bool = True) -> ssl.SSLContext:
        """A client trusting the server's CA, presenting the API server's certificate unless told not to."""
        context = ssl.create_default_context(cadata=self.serving.ca_pem().decode())
        if with_certificate:
            context.load_cert_chain(str(self.client.cert), str(self.client.key))
        return context

    def kubesim_options(self) -> dict[str, Any]:
        return {"webhook_client_cert": str(self.client.cert), "webhook_client_key": str(self.client.key)}


def mtls(directory: Path) -> Mtls:
    return Mtls(ensure_certificates(directory, ("localhost",)), ensure_client_certificates(directory))


def mtls_server(directory: Path, **options: Any) -> tuple[WebhookServer, Mtls]:
    """A started server requiring the client certificate of `directory` (metrics on a free port)."""
    files = mtls(directory)
    server = WebhookServer(files.server_context(), metrics_port=0, **options)
    server.start()
    return server, files
