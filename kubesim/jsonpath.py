"""The small JSONPath subset additionalPrinterColumns use: ``.a.b``, ``[0]``, ``['k']``, ``[?(@.f=="v")]``."""

from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(
    r"\.([A-Za-z0-9_$-]+)|\[(\d+)\]|\['([^']*)'\]"
    r"|\[\?\(@\.([A-Za-z0-9_.]+)\s*==\s*['\"]([^'\"]*)['\"]\)\]"
    r"|\[\*\]"
)


def evaluate(obj: Any, expr: str) -> list[Any]:
    """All values ``expr`` selects in ``obj`` (empty when nothing matches)."""
    expr = expr.strip()
    if expr.startswith("{") and expr.endswith("}"):
        expr = expr[1:-1]
    if expr.startswith("$"):
        expr = expr[1:]
    current = [obj]
    pos = 0
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            return []
        pos = m.end()
        key, index, quoted, fkey, fval = m.groups()
        nxt: list[Any] = []
        for cur in current:
            if key is not None or quoted is not None:
                k = key if key is not None else quoted
                if isinstance(cur, dict) and k in cur:
                    nxt.append(cur[k])
            elif index is not None:
                if isinstance(cur, list) and int(index) < len(cur):
                    nxt.append(cur[int(index)])
            elif fkey is not None:
                if isinstance(cur, list):
                    for item in cur:
                        v: Any = item
                        for part in fkey.split("."):
                            v = v.get(part) if isinstance(v, dict) else None
                        if v is not None and str(v) == fval:
                            nxt.append(item)
            elif isinstance(cur, list):
                nxt.extend(cur)
        current = nxt
    return current
