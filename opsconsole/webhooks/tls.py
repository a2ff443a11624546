"""Certificates for the webhook server, made with the `cryptography` package: a CA and a serving certificate it
signs (for the Service's DNS names, localhost and 127.0.0.1), kept in a directory (the data folder for the
embedded run and the tests; a mounted Secret in deploy/kustomize). API servers verify the serving certificate with the
CA, which `manage.py webhooks --ca-bundle` writes into the configurations.

The other direction (mutual TLS): a client CA of its own, which the server trusts for callers, and the API server's
client certificate it signs (`ensure_client_certificates`): kubesim presents it (`--webhook-client-cert/-key`), a
kube-apiserver through the kubeconfig of its AdmissionConfiguration. The client CA signs nothing else, so holding
the serving certificate's key never lets anyone call the server."""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLIENT_CN = "kube-apiserver"  # the identity of the client certificate made for the API server
DEFAULT_NAMES = ("opsconsole-webhooks.opsconsole.svc", "opsconsole-webhooks.opsconsole.svc.cluster.local",
                 "localhost")
CA_DAYS = 3650
SERVING_DAYS = 365


@dataclass(frozen=True)
class WebhookCertificates:
    """The files of the CA and of the serving certificate."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path

    def ca_pem(self) -> bytes:
        return self.ca_cert.read_bytes()


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def ensure_certificates(directory: str | Path, names: tuple[str, ...] = DEFAULT_NAMES) -> WebhookCertificates:
    """The CA and serving certificate in `directory`, made when missing (the CA is kept across restarts, so
    configurations holding its bundle keep working; a serving certificate that does not cover `names` is
    made again)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    files = WebhookCertificates(d / "webhook-ca.pem", d / "webhook-ca-key.pem", d / "webhook-tls.pem",
                                d / "webhook-tls-key.pem")
    now = datetime.datetime.now(datetime.UTC)
    if files.ca_cert.exists() and files.ca_key.exists():
        ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    else:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca = (x509.CertificateBuilder().subject_name(_name("opsconsole-webhooks-ca"))
              .issuer_name(_name("opsconsole-webhooks-ca")).public_key(ca_key.public_key())
              .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
              .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .sign(ca_key, hashes.SHA256()))
        _write_private(files.ca_key, _key_pem(ca_key))  # type: ignore[arg-type]
        files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    if files.cert.exists() and files.key.exists() and _covers(files.cert, names, now):
        return files
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=SERVING_DAYS))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))  # type: ignore[arg-type]
    _write_private(files.key, _key_pem(key))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return files


def _covers(path: Path, names: tuple[str, ...], now: datetime.datetime) -> bool:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    if cert.not_valid_after_utc - now < datetime.timedelta(days=30):
        return False
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return set(names) <= set(sans.get_values_for_type(x509.DNSName))


@dataclass(frozen=True)
class ClientCertificates:
    """The files of the client CA (the server trusts it) and of the API server's client certificate."""

    ca_cert: Path
    ca_key: Path
    cert: Path
    key: Path


def _new_ca(cn: str, now: datetime.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(_name(cn)).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def client_certificate(ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, cn: str,
                       days: int = SERVING_DAYS) -> tuple[bytes, bytes]:
    """(certificate PEM, key PEM) of a client certificate for `cn` signed by the CA (clientAuth only)."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(cn)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def ensure_client_certificates(directory: str | Path, cn: str = CLIENT_CN) -> ClientCertificates:
    """The client CA and the API server's client certificate (for `cn`) in `directory`, made when missing; the
    CA is kept across restarts, a client certificate within 30 days of expiry is made again."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    files = ClientCertificates(d / "webhook-client-ca.pem", d / "webhook-client-ca-key.pem",
                               d / "webhook-client.pem", d / "webhook-client-key.pem")
    now = datetime.datetime.now(datetime.UTC)
    if files.ca_cert.exists() and files.ca_key.exists():
        ca = x509.load_pem_x509_certificate(files.ca_cert.read_bytes())
        ca_key = serialization.load_pem_private_key(files.ca_key.read_bytes(), password=None)
    else:
        ca, ca_key = _new_ca("opsconsole-webhooks-client-ca", now)
        _write_private(files.ca_key, _key_pem(ca_key))
        files.ca_cert.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    if files.cert.exists() and files.key.exists():
        current = x509.load_pem_x509_certificate(files.cert.read_bytes())
        try:
            current.verify_directly_issued_by(ca)
            if current.not_valid_after_utc - now > datetime.timedelta(days=30):
                return files
        except (ValueError, TypeError, InvalidSignature):
            pass  # signed by a CA since replaced: made again
    cert_pem, key_pem = client_certificate(ca, ca_key, cn)  # type: ignore[arg-type]
    _write_private(files.key, key_pem)
    files.cert.write_bytes(cert_pem)
    return files
