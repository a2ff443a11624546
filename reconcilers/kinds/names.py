"""Object names where Kubernetes allows fewer characters than a name has: label values and DNS labels (63).

Names go to 253 characters; a label value, a Service's or a Namespace's name to 63. As Kubernetes controllers do
for long names, a name that does not fit is shortened to its first 50 characters (dots made dashes), '-' and 8 hex
digits of its sha256: unique in practice, stable, always a valid label value and DNS-1123 label."""

from __future__ import annotations

import hashlib

LABEL_MAX = 63
_PREFIX = 50


def label_value(name: str) -> str:
    """`name` when it fits a label value (63 characters), else its hashed short form."""
    if len(name) <= LABEL_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[:_PREFIX].replace('.', '-')}-{digest}"
