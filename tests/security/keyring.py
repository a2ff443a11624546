"""A test-only kind that handles Kubernetes Secrets, `Keyring` (test.opsconsole.io/v1, namespaced), as a
database operator would: it owns a Secret of generated credentials (`<name>-credentials`, created once), reads
the Secret its spec names (`spec.existingSecret`), logs both objects the careless way (as log arguments: the
redacting filter must hide their data) and names them in its status and message.

Registered by tests/security/test_secrets.py through OPSCONSOLE_RECONCILERS (in its worker processes too).
"""

from __future__ import annotations

import base64
import secrets
from typing import Any, ClassVar

from reconcilers.core.reconciler import Context, Reconciler, ResourceKind
from reconcilers.core.statemachine import StateMachine
from reconcilers.core.types import Result, TemporaryError
from tests.reconcilers.testkinds import kind_crd, kind_machine

KEYRING = ResourceKind("test.opsconsole.io", "v1", "keyrings", "Keyring", namespaced=True)
SECRET = ResourceKind("", "v1", "secrets", "Secret", namespaced=True)
MACHINE = kind_machine("Keyring")
CRD: dict[str, Any] = kind_crd(KEYRING)


def credentials_name(obj: dict[str, Any]) -> str:
    return f"{obj['metadata']['name']}-credentials"


class KeyringReconciler(Reconciler):
    """Generated credentials in an owned Secret; a referenced Secret read (see the module docstring)."""

    resource: ClassVar[ResourceKind] = KEYRING
    state_machine: ClassVar[StateMachine] = MACHINE
    owns: ClassVar[tuple[ResourceKind, ...]] = (SECRET,)

    def reconcile(self, ctx: Context, obj: dict[str, Any]) -> Result:
        namespace = obj["metadata"]["namespace"]
        name = credentials_name(obj)
        owned = ctx.get(SECRET, namespace, name)
        if owned is None:
            password = secrets.token_urlsafe(24)
            owned = ctx.apply_child({
                "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"password": base64.b64encode(password.encode()).decode()},
            })
        ctx.log.info("credentials ready for %s: %s", obj["metadata"]["name"], owned)
        existing = (obj.get("spec") or {}).get("existingSecret")
        if existing:
            referenced = ctx.get(SECRET, namespace, existing)
            if referenced is None:
                raise TemporaryError(f"secret {existing} not found", delay=0.5, reason="SecretMissing")
            ctx.log.info("using %s", referenced)
        return Result("Running", "CredentialsReady", f"credentials in secret {name}; using {existing or 'none'}",
                      status={"secretName": name, "existingSecret": existing or ""},
                      conditions=[ctx.condition("CredentialsReady", "True", "SecretWritten", f"secret {name}")])
