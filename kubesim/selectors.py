"""Label selectors (=, ==, !=, in, notin, exists, !exists) and field selectors, parsed as the apiserver does."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from kubesim.errors import bad_request

Matcher = Callable[[dict[str, Any]], bool]
_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")


def _split(expr: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in expr:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def parse_label_selector(expr: str | None) -> Matcher | None:
    """A predicate on an object's labels, or None for 'everything'. Raises 400 on bad syntax."""
    if not expr or not expr.strip():
        return None
    reqs: list[Callable[[dict[str, str]], bool]] = []
    equal: list[tuple[str, str]] = []  # the `key=value` requirements: a store's label index answers them
    for part in _split(expr):
        m = _EQ_RE.match(part)
        if m:
            key, op, value = m.groups()
            if op == "!=":
                reqs.append(lambda labels, k=key, v=value: labels.get(k) != v)
            else:
                reqs.append(lambda labels, k=key, v=value: labels.get(k) == v)
                equal.append((key, value))
            continue
        m = _SET_RE.match(part)
        if not m:
            raise bad_request(f"unable to parse requirement: found '{part.strip()}', expected: in, notin, =, ==, !=")
        neg, key, op, values = m.groups()
        if op:
            if neg:
                raise bad_request(f"unable to parse requirement: {part.strip()}")
            vals = {v.strip() for v in values.split(",") if v.strip()}
            if op == "in":
                reqs.append(lambda labels, k=key, vs=vals: labels.get(k) in vs)
            else:
                reqs.append(lambda labels, k=key, vs=vals: labels.get(k) not in vs)
        elif neg:
            reqs.append(lambda labels, k=key: k not in labels)
        else:
            reqs.append(lambda labels, k=key: k in labels)

    def match(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(r(labels) for r in reqs)

    match.equal = tuple(equal)  # type: ignore[attr-defined]
    return match


def equal_requirements(matcher: Matcher | None) -> tuple[tuple[str, str], ...]:
    """The `key=value` requirements of a parsed label selector (every object it matches has these labels)."""
    return tuple(getattr(matcher, "equal", ()))


def selector_from_label_selector(sel: dict[str, Any] | None) -> Matcher:
    """A predicate from a metav1.LabelSelector (matchLabels and matchExpressions)."""
    sel = sel or {}
    match_labels = sel.get("matchLabels") or {}
    exprs = sel.get("matchExpressions") or []

    def match(obj: dict[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        for k, v in match_labels.items():
            if labels.get(k) != v:
                return False
        for e in exprs:
            key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
            if op == "In" and labels.get(key) not in values:
                return False
            if op == "NotIn" and key in labels and labels.get(key) in values:
                return False
            if op == "Exists" and key not in labels:
                return False
            if op == "DoesNotExist" and key in labels:
                return False
        return True

    return match


def label_selector_string(sel: dict[str, Any] | None) -> str:
    """The string form of a metav1.LabelSelector (as status.selector carries it)."""
    sel = sel or {}
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for e in sel.get("matchExpressions") or []:
        op, key, values = e.get("operator"), e.get("key"), ",".join(sorted(e.get("values") or []))
        parts.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                      "DoesNotExist": f"!{key}"}.get(op, key))
    return ",".join(parts)


def _field_value(obj: dict[str, Any], path: str) -> str:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, dict) and path.endswith("source"):
        return str(cur.get("component", ""))
    return str(cur)


def parse_field_selector(expr: str | None, supported: tuple[str, ...]) -> Matcher | None:
    """A predicate from a field selector; 400 for fields the resource does not support."""
    if not expr or not expr.strip():
        return None
    reqs: list[tuple[str, bool, str]] = []
    for part in _split(expr):
        m = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if not m:
            raise bad_request(f"invalid selector: '{expr}'; can't understand '{part}'")
        field_name, op, value = m.groups()
        if field_name not in ("metadata.name", "metadata.namespace") and field_name not in supported:
            raise bad_request(f'field label not supported: {field_name}')
        reqs.append((field_name, op == "!=", value))

    def match(obj: dict[str, Any]) -> bool:
        for field_name, negate, value in reqs:
            actual = _field_value(obj, field_name)
            if (actual == value) == negate:
                return False
        return True

    return match
