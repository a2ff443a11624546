"""kubesim's JSON helpers (kubesim.meta) and template hashes: orjson where it is exact, the standard library where
it is not, and the same bytes and hashes as before."""

from __future__ import annotations

import json

import pytest

from kubesim import meta
from kubesim.controllers import workloads

OBJ = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "é-cm", "labels": {"a": "ü ✓"}},
       "data": {"n": "1"}, "spec": {"replicas": 3, "ratio": 0.1, "on": True, "none": None, "list": [1, {"x": []}]}}


def test_dumps_is_the_compact_utf8_json_the_standard_library_writes():
    assert meta.dumps_bytes(OBJ) == json.dumps(OBJ, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert meta.dumps(OBJ) == json.dumps(OBJ, separators=(",", ":"), ensure_ascii=False)


def test_what_orjson_refuses_is_written_by_the_standard_library():
    big = {"spec": {"huge": 2**70}}
    assert meta.dumps_bytes(big) == b'{"spec":{"huge":1180591620717411303424}}'


def test_clone_is_deep_and_equal_even_where_orjson_cannot_encode():
    for value in (OBJ, {"spec": {"huge": 2**70, "list": [{"a": 1}]}}):
        copy = meta.clone(value)
        assert copy == value and copy is not value
        copy["spec"]["list"][-1]["added"] = True
        assert "added" not in value["spec"]["list"][-1]  # nothing shared


@pytest.mark.parametrize("bad", [b"{not json", b'{"a": NaN}', b"\xff"])
def test_loads_refuses_what_is_not_json(bad):
    with pytest.raises(ValueError):
        meta.loads(bad)


def test_template_hashes_are_remembered_and_unchanged():
    template = {"metadata": {"labels": {"app": "memcached"}},
                "spec": {"containers": [{"name": "memcached", "image": "memcached:1.6"}]}}
    raw = json.dumps(template, sort_keys=True, separators=(",", ":")).encode() + b"0"
    expected = "".join(workloads._SAFE[int(c) % len(workloads._SAFE)] for c in str(workloads.fnv32a(raw)))
    workloads._hash_of.cache_clear()
    assert workloads.template_hash(template) == expected == workloads.template_hash(template)
    assert workloads._hash_of.cache_info().hits == 1
    assert workloads.template_hash(template, collision_count=1) != expected
