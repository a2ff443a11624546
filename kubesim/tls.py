"""A self-signed serving certificate (via the ``openssl`` command), so kubectl sends its bearer token.

client-go (kubectl) never sends a bearer token over plain HTTP, so with authentication on kubesim
serves HTTPS and writes the certificate into the kubeconfig as ``certificate-authority-data``.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path


class TLSUnavailable(RuntimeError):
    """No ``openssl`` to create a certificate with."""


def ensure_certificate(directory: str, host: str = "127.0.0.1") -> tuple[str, str]:
    """``(cert.pem, key.pem)`` in ``directory``, created (valid 10 years, SAN host/localhost) if missing."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    cert, key = d / "kubesim-cert.pem", d / "kubesim-key.pem"
    if cert.exists() and key.exists():
        return str(cert), str(key)
    openssl = shutil.which("openssl")
    if openssl is None:
        raise TLSUnavailable("openssl is not on PATH; pass --tls-cert/--tls-key or --no-tls")
    san = "DNS:localhost,IP:127.0.0.1"
    if host not in ("127.0.0.1", "localhost", "0.0.0.0", ""):
        san += f",IP:{host}" if host.replace(".", "").isdigit() else f",DNS:{host}"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "3650", "-subj", "/CN=kubesim",
         "-addext", f"subjectAltName={san}", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,digitalSignature,keyEncipherment,keyCertSign"],
        check=True, capture_output=True,
    )
    key.chmod(0o600)
    return str(cert), str(key)


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """The serving SSL context."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    return ctx
