"""label_value: a name over 63 characters becomes its first 50 (dots made dashes), '-' and 8 hex of its sha256."""

from __future__ import annotations

import hashlib
import re

from reconcilers.kinds.memcached import child_name, deployment_manifest, selector_labels, service_manifest
from reconcilers.kinds.names import label_value

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LONG = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])  # 253 characters: the longest valid name


def test_short_names_are_kept_and_long_ones_hashed_into_a_dns_label() -> None:
    assert len(LONG) == 253
    assert label_value("web") == "web" and label_value("x" * 63) == "x" * 63
    short = label_value(LONG)
    assert short == "a" * 50 + "-" + hashlib.sha256(LONG.encode()).hexdigest()[:8]
    assert len(short) == 59 and _LABEL.match(short)
    assert label_value("a.b" + "c" * 62) == "a-b" + "c" * 47 + "-" + hashlib.sha256(
        ("a.b" + "c" * 62).encode()).hexdigest()[:8]
    assert label_value(LONG) != label_value(LONG[:-1] + "e")  # the hash tells names with one prefix apart


def test_a_long_memcacheds_children_and_labels_fit() -> None:
    from reconcilers.kinds.memcached import MemcachedSpec

    obj = {"metadata": {"name": LONG, "namespace": "default"}}
    spec = MemcachedSpec(size=1)
    deployment, service = deployment_manifest(obj, spec), service_manifest(obj, spec)
    for manifest in (deployment, service):
        assert manifest["metadata"]["name"] == child_name(LONG) == label_value(LONG)
        assert all(len(v) <= 63 for v in manifest["metadata"]["labels"].values())
    assert selector_labels(LONG)["app.kubernetes.io/instance"] == label_value(LONG)
    assert deployment_manifest({"metadata": {"name": "web"}}, spec)["metadata"]["name"] == "web"  # unchanged
