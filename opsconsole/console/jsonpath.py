"""The small part of Kubernetes JSONPath that CRD printer columns use: `.a.b`, `.a[0]`, `.a[*].b` and
filters `.a[?(@.type=="Ready")].b`, evaluated on a plain object. Anything else gives '' (never an error)."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r"""\.([A-Za-z0-9_\-]+)|\[(\d+|\*)\]|\[\?\(@\.([A-Za-z0-9_\-]+)\s*==\s*["']([^"']*)["']\)\]""")


def evaluate(path: str, obj: Any) -> Any:
    """The value at `path` in `obj` (a list when a wildcard or filter matched several; '' when none)."""
    values = [obj]
    pos = 0
    path = path.strip().removeprefix("{").removesuffix("}")
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            return ""
        pos = m.end()
        field, index, fkey, fvalue = m.groups()
        nxt: list[Any] = []
        for v in values:
            if field is not None and isinstance(v, dict) and field in v:
                nxt.append(v[field])
            elif index is not None and isinstance(v, list):
                if index == "*":
                    nxt.extend(v)
                elif int(index) < len(v):
                    nxt.append(v[int(index)])
            elif fkey is not None and isinstance(v, list):
                nxt.extend(i for i in v if isinstance(i, dict) and str(i.get(fkey)) == fvalue)
        values = nxt
    if not values:
        return ""
    return values[0] if len(values) == 1 else values
