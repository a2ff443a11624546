"""Who an actor on record is, and how that was established: one vocabulary for every chained table.

An actor is a string; its prefix says how the identity was established, so that a record never shows a name a
client could send as if it were an identity:

| actor | established | how |
| --- | --- | --- |
| `controller` | `engine` | the engine's own write, recognised by the resourceVersion that write returned |
| `rollback:auto`, `rollback:user:<name>` | `engine` | a rollback the engine made (itself, or for a person) |
| `user:<name>` | `session` | a person or token authenticated by the console or the API |
| `kube:<username>` | `admission` | the user the API server authenticated, per its admission review (mutual TLS) |
| `manager:<field manager>` | `claim` | a field-manager name from managedFields: anyone may send any |
| `unknown` (or empty) | `unknown` | nobody could be established |

Pure functions over strings: no Django, no I/O.
"""

from __future__ import annotations

ENGINE = "controller"
USER = "user:"
KUBE = "kube:"
MANAGER = "manager:"
ROLLBACK = "rollback:"
UNKNOWN = "unknown"

#: how an actor was established (`established`), each with the words the console and the API show
ESTABLISHED = {
    "engine": "the engine's own write (recognised by the resourceVersion it returned)",
    "session": "authenticated by opsconsole (console session or API token)",
    "admission": "authenticated by the Kubernetes API server (admission review over mutual TLS)",
    "claim": "a claim: a field-manager name, which any client may send",
    "unknown": "not established",
}


def kube_actor(username: str) -> str:
    """The actor of a Kubernetes user the API server authenticated: `kube:<username>`."""
    return f"{KUBE}{username or UNKNOWN}"[:255]


def manager_claim(manager: str | None) -> str:
    """The actor of a field-manager name (a claim): `manager:<name>`, `manager:unknown` without one."""
    return f"{MANAGER}{manager or UNKNOWN}"[:255]


def established(actor: str | None) -> str:
    """How `actor` was established: `engine`, `session`, `admission`, `claim` or `unknown` (see the table)."""
    if not actor or actor == UNKNOWN:
        return "unknown"
    if actor == ENGINE or actor.startswith(ROLLBACK):
        return "engine"
    if actor.startswith(USER):
        return "session"
    if actor.startswith(KUBE):
        return "admission"
    if actor.startswith(MANAGER):
        return "claim"
    return "unknown"


def is_claim(actor: str | None) -> bool:
    """Whether `actor` is only a claim (or nothing at all): never to be shown as an identity."""
    return established(actor) in ("claim", "unknown")
