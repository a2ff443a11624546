"""Building blocks of the selectors' filters: a Kubernetes label selector compiled to a Django `Q` over the
mirrored `labels` JSON, the namespace limit, and `InvalidFilter` (bad input that names its field; the API
answers 400 with it)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.db.models import Q

from reconcilers.engine.shards.selector import terms as selector_terms
from reconcilers.services.selectors.scope import scope_q

_KEY = r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EQ_RE = re.compile(rf"^\s*({_KEY})\s*(==|!=|=)\s*({_VALUE})\s*$")
_SET_RE = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\(([^)]*)\)\s*$")
_EXISTS_RE = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")
_VALUE_RE = re.compile(rf"^{_VALUE}$")


class InvalidFilter(ValueError):
    """A filter value that cannot be used; `field` names the query parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def nul_free(**values: str) -> None:
    """Raise InvalidFilter naming the first value that holds a NUL character: no stored text holds one, and
    PostgreSQL refuses to compare with one (it would be a database error, not an empty answer)."""
    for field, value in values.items():
        if isinstance(value, str) and "\x00" in value:
            raise InvalidFilter(field, "must not contain NUL characters")


def label_selector_q(expr: str, *, field: str = "selector", column: str = "labels") -> Q:
    """Compile a label selector (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`, joined by commas)
    into a Q on the JSON column. Raises InvalidFilter on bad syntax. As in Kubernetes, `!=` and `notin` also
    match objects without the label."""
    if len(expr) > 1024:
        raise InvalidFilter(field, "the selector is longer than 1024 characters")
    q = Q()
    if not expr.strip():
        return q
    for part in selector_terms(expr):  # the engine's splitter: the commas outside parentheses, each term stripped
        if "__" in part:
            raise InvalidFilter(field, f"label keys with '__' are not supported: {part!r}")
        if m := _EQ_RE.match(part):
            key, op, value = m.group(1), m.group(4), m.group(5)
            has = Q(**{f"{column}__has_key": key})
            equal = has & Q(**{f"{column}__{key}": value})
            q &= ~has | (has & ~Q(**{f"{column}__{key}": value})) if op == "!=" else equal
        elif m := _SET_RE.match(part):
            key, op, values = m.group(1), m.group(4), [v.strip() for v in m.group(5).split(",") if v.strip()]
            if not values or not all(_VALUE_RE.match(v) for v in values):
                raise InvalidFilter(field, f"bad value list in {part!r}")
            has = Q(**{f"{column}__has_key": key})
            inside = Q(**{f"{column}__{key}__in": values})
            q &= (has & inside) if op == "in" else (~has | (has & ~inside))
        elif m := _EXISTS_RE.match(part):
            has = Q(**{f"{column}__has_key": m.group(2)})
            q &= ~has if m.group(1) else has
        else:
            raise InvalidFilter(
                field, f"unable to parse requirement {part!r}: expected in, notin, =, ==, !=, key or !key")
    return q


def namespace_q(namespaces: Iterable[str] | None, column: str = "namespace") -> Q:
    """A Q limiting rows to the namespaces (None: no limit; empty: nothing); a `scope.Scope` limits by cluster
    and namespace (the cluster column beside `column`)."""
    return scope_q(namespaces, column)
