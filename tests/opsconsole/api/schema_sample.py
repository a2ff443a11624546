"""How many generated cases each served operation gets in the schemathesis tests.

The API serves one view under several addresses: by database id (`/resources/{id}/…`), by uid
(`/resources/by-uid/{uid}/…`) and by Kubernetes key (`/kinds/{group}/{kind}[/namespaces/{namespace}]/{name}/…`, and
in a named cluster `/clusters/{cluster}/kinds/…`), all through `opsconsole.api.by_key`. Of 130 operations, 85 are
such aliases. The view behind an alias (its body parsing, refusals, audit) is already exercised through the id
address; what the alias adds is its own path parameters and how they resolve. So an alias gets a small sample of
its own (ALIAS_SHARE of the full count, at least ALIAS_MINIMUM: one case in each mode and for each identity at
the tests' counts), and the id address the full count. The two schemathesis tests had grown with the addressed
actions, then with the cluster routes, to the two longest units of the suite (182 and 163 s of a loaded run)."""

from __future__ import annotations

import re
from collections.abc import Iterable

ALIAS_SHARE = 0.125
ALIAS_MINIMUM = 1

_ALIASES = (
    re.compile(r"^(?P<prefix>.*/)clusters/\{cluster\}/kinds/\{group\}/\{kind\}/(?:namespaces/\{namespace\}/)?\{name\}"
               r"(?P<rest>/.*)?$"),
    re.compile(r"^(?P<prefix>.*/)kinds/\{group\}/\{kind\}/(?:namespaces/\{namespace\}/)?\{name\}(?P<rest>/.*)?$"),
    re.compile(r"^(?P<prefix>.*/)resources/by-uid/\{uid\}(?P<rest>/.*)?$"),
)


def canonical(method: str, path: str, served: set[tuple[str, str]]) -> tuple[str, str] | None:
    """The `/resources/{id}…` operation an aliased operation addresses the same view as, or None when this
    operation is no alias (or its id form is not served)."""
    for pattern in _ALIASES:
        match = pattern.match(path)
        if match:
            target = (method.upper(), f"{match['prefix']}resources/{{id}}{match['rest'] or ''}")
            return target if target in served else None
    return None


class Sample:
    """The number of cases per operation for a set of served operations (schemathesis APIOperation objects)."""

    def __init__(self, operations: Iterable) -> None:
        self._served = {(op.method.upper(), op.path) for op in operations}

    def is_alias(self, operation) -> bool:
        return canonical(operation.method, operation.path, self._served) is not None

    def examples(self, operation, full: int) -> int:
        """`full` for an operation of its own, a smaller share for an alias of one."""
        if not self.is_alias(operation):
            return full
        return max(ALIAS_MINIMUM, round(full * ALIAS_SHARE))
