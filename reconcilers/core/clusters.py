"""Which cluster a key, a row or a request belongs to: the cluster's name rules and the key's cluster prefix.

opsconsole can watch several clusters into one database. A cluster is named (a DNS label: `prod-eu-1`); the one a
single-cluster install always had is DEFAULT_CLUSTER. The workqueue key of an object in the default cluster is
unchanged, `group/version/plural/namespace/name` (five parts), so every key an existing install stored or sent
keeps its meaning; an object in any other cluster has the cluster's name in front,
`cluster/group/version/plural/namespace/name` (six parts). A name is a DNS label, so it never holds a `/` and the
two forms cannot be confused. Pure: no Django, no client.
"""

from __future__ import annotations

import re

#: the cluster a single-cluster install has always had; its keys carry no prefix
DEFAULT_CLUSTER = "default"
#: a cluster's name: a DNS label (RFC 1123), as a Kubernetes namespace's
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
KEY_PARTS = 5


def cluster_name_check(name: str) -> str:
    """`name` when it is a valid cluster name (a DNS label of at most 63 characters), else ValueError saying why."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"a cluster name is a DNS label (lower-case letters, digits and '-', at most 63), "
                         f"not {name!r}")
    return name


def key_split(key: str) -> tuple[str, str]:
    """(cluster, the five-part key) of a workqueue key in either form; ValueError on a key of neither."""
    parts = key.split("/")
    if len(parts) == KEY_PARTS:
        return DEFAULT_CLUSTER, key
    if len(parts) == KEY_PARTS + 1:
        return cluster_name_check(parts[0]), key.split("/", 1)[1]
    raise ValueError(f"not a reconcile key: {key!r}")


def key_join(cluster: str, key: str) -> str:
    """The workqueue key of the five-part `key` in `cluster`: unchanged in the default cluster, prefixed in any
    other."""
    return key if cluster == DEFAULT_CLUSTER else f"{cluster_name_check(cluster)}/{key}"
