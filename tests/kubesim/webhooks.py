"""Test helpers for admission webhooks: a CA with serving and client certificates (the `cryptography` package), and
an HTTPS webhook server in a thread whose answers a test decides (a function of the AdmissionReview), recording
every review it receives."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Pki:
    """A CA and the files of a serving and a client certificate it signed."""

    ca_pem: bytes
    server_cert: str
    server_key: str
    client_cert: str
    client_key: str
    ca_cert: str


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))


def make_pki(directory: Path, dns_names: list[str], cn: str = "webhook-ca") -> Pki:
    """A CA (`cn`), a serving certificate for `dns_names` and 127.0.0.1, and a client certificate."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn)).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=1))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))

    def leaf(name: str, sans: list[x509.GeneralName], usage: x509.ObjectIdentifier) -> tuple[x509.Certificate,
                                                                                              ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=1))
                   .not_valid_after(now + datetime.timedelta(days=1))
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False))
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return builder.sign(ca_key, hashes.SHA256()), key

    server, server_key = leaf("webhook", [*(x509.DNSName(n) for n in dns_names),
                                          x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                              ExtendedKeyUsageOID.SERVER_AUTH)
    client, client_key = leaf("kubesim-apiserver", [], ExtendedKeyUsageOID.CLIENT_AUTH)
    directory.mkdir(parents=True, exist_ok=True)
    files = {}
    for label, cert, key in (("server", server, server_key), ("client", client, client_key)):
        (directory / f"{label}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(key, directory / f"{label}-key.pem")
        files[label] = (str(directory / f"{label}.pem"), str(directory / f"{label}-key.pem"))
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    (directory / "ca.pem").write_bytes(ca_pem)
    return Pki(ca_pem, *files["server"], *files["client"], str(directory / "ca.pem"))


Answer = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class WebhookServer:
    """An HTTPS server answering AdmissionReviews: `answers[path](request) -> response fields` (uid added);
    `reviews` holds (path, review, client certificate subject or None) for every call."""

    port: int = 0
    answers: dict[str, Answer] = field(default_factory=dict)
    reviews: list[tuple[str, dict[str, Any], str | None]] = field(default_factory=list)
    delay: float = 0.0  # seconds to wait before answering (timeouts)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def for_path(self, path: str) -> list[dict[str, Any]]:
        return [review for p, review, _ in self.reviews if p == path]


@contextmanager
def webhook_server(pki: Pki, *, require_client_cert: bool = False) -> Iterator[WebhookServer]:
    """Serve a WebhookServer over TLS (the PKI's serving certificate) until the block ends."""
    state = WebhookServer()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - the http.server interface
            length = int(self.headers.get("Content-Length") or 0)
            review = json.loads(self.rfile.read(length) or b"{}")
            peer = self.connection.getpeercert() if hasattr(self.connection, "getpeercert") else None
            subject = None
            if peer:
                subject = dict(x[0] for x in peer.get("subject", ())).get("commonName")
            state.reviews.append((self.path, review, subject))
            if state.delay:
                time.sleep(state.delay)
            answer = state.answers.get(self.path)
            if answer is None:
                self.send_response(404)
                self.end_headers()
                return
            request = review.get("request") or {}
            response = {"uid": request.get("uid"), "allowed": True, **answer(request)}
            body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                               "response": response}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca_cert)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, name="webhook-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
