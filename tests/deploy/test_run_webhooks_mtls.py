"""`make run`'s sandbox wires both ends of the webhooks' mutual TLS: kubesim presents the client certificate that
`runwebhooks` (reading the same data dir) trusts, made before kubesim starts."""

from __future__ import annotations

import ssl
from pathlib import Path

from cryptography import x509

from scripts.run import procfile_lines, webhook_client_files


def test_kubesim_presents_the_client_certificate_the_webhook_server_trusts(tmp_path: Path) -> None:
    cert, key = webhook_client_files(tmp_path)
    lines = procfile_lines({"OPSCONSOLE_KUBESIM": "1", "KUBECONFIG": str(tmp_path / "k")}, tmp_path, "login")
    (kubesim,) = [line for line in lines if line.startswith("kubesim:")]
    (webhooks,) = [line for line in lines if line.startswith("webhooks:")]
    assert f"--webhook-client-cert {cert}" in kubesim and f"--webhook-client-key {key}" in kubesim
    assert "--insecure-skip-client-verify" not in webhooks and "--metrics-port" in webhooks
    # runwebhooks' default cert dir is <data dir>/webhooks: the CA it trusts there signed kubesim's certificate
    ca = x509.load_pem_x509_certificate((tmp_path / "webhooks" / "webhook-client-ca.pem").read_bytes())
    x509.load_pem_x509_certificate(cert.read_bytes()).verify_directly_issued_by(ca)
    ssl.create_default_context().load_cert_chain(str(cert), str(key))  # a usable pair
    made = cert.read_bytes()
    assert webhook_client_files(tmp_path) == (cert, key) and cert.read_bytes() == made  # kept across runs
