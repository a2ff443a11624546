"""How the action record names an object, and finding both of the forms it has used.

Every action about an object names it by its workqueue key, `group/version/plural/namespace/name`
(`reconcilers.engine.admission.object_target`): the console links to it and the `target` filter suggests it.
Admission decisions recorded before issue 43 named it `Kind namespace/name`; they stay as they are (`target` is one
of the fields the action record's hash chain covers, so rewriting them would break the chain), and the `target`
filter matches a prefix of either form in both: `target_forms` gives the other form of a prefix, through the
registered kinds.
"""

from __future__ import annotations

import re

from reconcilers.engine import registry

_LEGACY = re.compile(r"^([A-Z][A-Za-z0-9]*)(?: (.*))?$")


def target_forms(prefix: str) -> list[str]:
    """`prefix` and, when it names a registered kind in one form, the same prefix in the other form:
    `cache.example.com/v1alpha1/memcacheds/team-a/` ⇄ `Memcached team-a/`."""
    forms = [prefix]
    if not prefix:
        return forms
    if (legacy := _LEGACY.match(prefix)) is not None:
        kind, rest = legacy.group(1), legacy.group(2)
        for rec in registry.registered():
            r = rec.resource
            if r.kind != kind:
                continue
            base = f"{r.group}/{r.version}/{r.plural}/"
            if rest is None:  # "Memcached": every one of the kind
                forms.append(base)
            else:
                forms.append(base + (rest if r.namespaced else "/" + rest))
        return forms
    parts = prefix.split("/")
    if len(parts) >= 3 and parts[2] and " " not in prefix:  # group/version/plural[/namespace[/name]]
        try:
            rec = registry.for_kind(parts[0], parts[2])
        except registry.UnknownKind:
            return forms
        namespace, name = (parts[3] if len(parts) > 3 else ""), "/".join(parts[4:])
        if len(parts) <= 4:  # the kind, or a namespace (a prefix of one): "Memcached team-a"
            forms.append(f"{rec.resource.kind} {namespace}")
        else:
            forms.append(f"{rec.resource.kind} {namespace + '/' if namespace else ''}{name}")
    return forms


def target_example() -> str:
    """What the `target` filter suggests: the key form, for the first registered kind's objects."""
    kinds = registry.registered()
    if not kinds:
        return "group/version/plural/namespace/name"
    r = kinds[0].resource
    return f"{r.group}/{r.version}/{r.plural}/{'default/' if r.namespaced else '/'}"
