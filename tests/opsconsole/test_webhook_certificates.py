"""The webhook server's certificates: generated once per directory (the CA kept across restarts), made again
when they no longer cover the names or come within 30 days of expiry, and a renewed certificate is served without a
restart and without a failed request."""

from __future__ import annotations

import socket
import ssl
import threading
import urllib.request

from cryptography import x509

from kubesim.testing import wait_for
from opsconsole.webhooks.server import CertificateReloader, WebhookServer, tls_context
from opsconsole.webhooks.tls import ensure_certificates, ensure_client_certificates

CLIENT: list[str] = []  # the API server's client certificate and key of the running test


def _client_context(ca: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.decode())
    context.load_cert_chain(*CLIENT)
    return context


def _served_serial(port: int, ca: bytes) -> int:
    context = _client_context(ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as tls:
        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_the_ca_is_kept_and_the_serving_certificate_follows_the_names(tmp_path):
    first = ensure_certificates(tmp_path, ("localhost",))
    ca, cert = first.ca_cert.read_bytes(), first.cert.read_bytes()
    assert ensure_certificates(tmp_path, ("localhost",)).cert.read_bytes() == cert  # nothing to do
    again = ensure_certificates(tmp_path, ("localhost", "hooks.example.svc"))
    assert again.ca_cert.read_bytes() == ca and again.cert.read_bytes() != cert
    names = x509.load_pem_x509_certificate(again.cert.read_bytes()).extensions.get_extension_for_class(
        x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert names == ["localhost", "hooks.example.svc"]
    assert (first.key.stat().st_mode & 0o777, first.ca_key.stat().st_mode & 0o777) == (0o600, 0o600)


def test_a_renewed_certificate_is_served_without_a_restart_or_a_failed_request(tmp_path):
    files = ensure_certificates(tmp_path, ("localhost",))
    client = ensure_client_certificates(tmp_path)
    CLIENT[:] = [str(client.cert), str(client.key)]
    ca = files.ca_pem()
    context = tls_context(str(files.cert), str(files.key), str(client.ca_cert))
    server = WebhookServer(context)
    port = server.start()
    reloader = CertificateReloader(context, str(files.cert), str(files.key), client_ca=str(client.ca_cert))
    failures: list[BaseException] = []
    done = threading.Event()
    answered = 0

    def hammer() -> None:  # new connections all along the renewal
        nonlocal answered
        client_context = _client_context(ca)
        while not done.is_set():
            try:
                with urllib.request.urlopen(f"https://localhost:{port}/healthz", context=client_context,
                                            timeout=5) as resp:
                    assert resp.read() == b"ok"
                    answered += 1
            except BaseException as exc:  # noqa: BLE001 - collected for the assertion
                failures.append(exc)

    before = _served_serial(port, ca)
    thread = threading.Thread(target=hammer)
    thread.start()
    try:
        wait_for(lambda: answered >= 5, timeout=10)
        files.cert.unlink()  # the renewal: same CA, a new serving certificate
        ensure_certificates(tmp_path, ("localhost",))
        seen = answered
        wait_for(lambda: answered >= seen + 5, timeout=10)  # served from the loaded certificate meanwhile
        assert reloader.check() is True
        assert reloader.check() is False  # nothing changed since
        seen = answered
        wait_for(lambda: answered >= seen + 5, timeout=10)
        after = _served_serial(port, ca)
    finally:
        done.set()
        thread.join()
        server.stop()
    assert after != before
    assert failures == [] and answered > 0
