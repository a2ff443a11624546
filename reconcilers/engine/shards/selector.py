"""A canary shard's label selector: the equality-based form Kubernetes accepts (`a=b`, `a==b`, `a!=b`, `a`, `!a`,
comma-separated, all must hold) and the set form (`a in (x,y)`, `a notin (x,y)`), parsed once and matched against
an object's labels. A selector that cannot be parsed is a ValueError naming what is wrong, before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_KEY = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_VALUE = r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?"
_EQ = re.compile(rf"^(?P<key>{_KEY})\s*(?P<op>==|=|!=)\s*(?P<value>{_VALUE})$")
_SET = re.compile(rf"^(?P<key>{_KEY})\s+(?P<op>in|notin)\s+\((?P<values>[^()]*)\)$")
_EXISTS = re.compile(rf"^(?P<neg>!?)\s*(?P<key>{_KEY})$")


@dataclass(frozen=True)
class Requirement:
    """One term: `key` `op` (`=`, `!=`, `in`, `notin`, `exists`, `!exists`) `values`."""

    key: str
    op: str
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the labels satisfy this term (`!=` and `notin` hold for an absent label, as Kubernetes says)."""
        present = self.key in labels
        value = labels.get(self.key)
        if self.op in ("=", "in"):
            return present and value in self.values
        if self.op in ("!=", "notin"):
            return not present or value not in self.values
        return present if self.op == "exists" else not present


@dataclass(frozen=True)
class Selector:
    """A parsed label selector: every requirement must hold."""

    text: str
    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object with these labels is selected."""
        return all(r.matches(labels or {}) for r in self.requirements)


def terms(text: str) -> list[str]:
    """Split on the commas outside parentheses."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    parts.append(current)
    return [t.strip() for t in parts]


def parse(text: str) -> Selector:
    """The selector `text` (see the module); ValueError naming the term that is not one."""
    if not text or not text.strip():
        raise ValueError("selector: empty (a canary shard selects its objects, e.g. opsconsole.io/canary=true)")
    requirements = []
    for term in terms(text):
        if m := _EQ.match(term):
            op = "!=" if m["op"] == "!=" else "="
            requirements.append(Requirement(m["key"], op, frozenset({m["value"]})))
        elif m := _SET.match(term):
            values = frozenset(v.strip() for v in m["values"].split(",") if v.strip())
            requirements.append(Requirement(m["key"], m["op"], values))
        elif m := _EXISTS.match(term):
            requirements.append(Requirement(m["key"], "!exists" if m["neg"] else "exists"))
        else:
            raise ValueError(f"selector {text!r}: {term!r} is not a label requirement (key=value, key!=value, "
                             "key in (a,b), key notin (a,b), key, !key)")
    return Selector(text.strip(), tuple(requirements))


def labels_of(obj: Mapping | None) -> dict[str, str]:
    """An object's labels (empty when it has none)."""
    return dict(((obj or {}).get("metadata") or {}).get("labels") or {})
