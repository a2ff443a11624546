"""The schemathesis tests' sample sizes: an operation addressing a view by uid or key is an alias of its
`/resources/{id}` form only when that form is served with the same method."""

from __future__ import annotations

from types import SimpleNamespace

from tests.opsconsole.api.schema_sample import Sample, canonical

SERVED = {("POST", "/api/v1/resources/{id}/reconcile"), ("GET", "/api/v1/resources/{id}")}


def test_uid_and_key_addresses_are_aliases_of_the_id_address():
    assert canonical("post", "/api/v1/resources/by-uid/{uid}/reconcile", SERVED) == \
        ("POST", "/api/v1/resources/{id}/reconcile")
    assert canonical("post", "/api/v1/kinds/{group}/{kind}/namespaces/{namespace}/{name}/reconcile", SERVED) == \
        ("POST", "/api/v1/resources/{id}/reconcile")
    assert canonical("get", "/api/v1/kinds/{group}/{kind}/{name}", SERVED) == ("GET", "/api/v1/resources/{id}")


def test_the_cluster_key_addresses_are_aliases_of_the_id_address_too():
    assert canonical("post", "/api/v1/clusters/{cluster}/kinds/{group}/{kind}/namespaces/{namespace}/{name}/reconcile",
                     SERVED) == ("POST", "/api/v1/resources/{id}/reconcile")
    assert canonical("get", "/api/v1/clusters/{cluster}/kinds/{group}/{kind}/{name}", SERVED) == \
        ("GET", "/api/v1/resources/{id}")
    assert canonical("get", "/api/v1/clusters/{cluster}", SERVED) is None


def test_an_operation_without_an_id_form_or_of_another_method_is_its_own():
    assert canonical("get", "/api/v1/kinds/{group}/{kind}/{name}/reconcile", SERVED) is None
    assert canonical("post", "/api/v1/resources/by-uid/{uid}/whatif", SERVED) is None
    assert canonical("get", "/api/v1/resources", SERVED) is None


def test_an_alias_gets_an_eighth_and_at_least_one():
    ops = [SimpleNamespace(method=m.lower(), path=p) for m, p in SERVED]
    alias = SimpleNamespace(method="post", path="/api/v1/resources/by-uid/{uid}/reconcile")
    sample = Sample([*ops, alias])
    assert sample.examples(ops[0], 8) == 8
    assert sample.examples(alias, 24) == 3 and sample.examples(alias, 8) == 1 and sample.examples(alias, 3) == 1
