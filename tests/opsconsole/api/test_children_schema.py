"""`children` and `live_children` are described in the API schema (issue 43): `children` holds only mirrored
resources of registered kinds (so it is `[]` next to a filled `live_children` when a resource owns plain Kubernetes
objects, as every built-in kind does: by design, not a bug), `live_children` every owned object read live."""

from __future__ import annotations

import pytest
from drf_spectacular.generators import SchemaGenerator


@pytest.fixture(scope="module")
def components() -> dict:
    return SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]


def test_both_fields_say_what_they_hold_and_when_children_is_empty(components):
    for name in ("Resource", "ResourceDetail"):
        children = components[name]["properties"]["children"]["description"]
        assert "registered kinds" in children and "Empty when" in children and "live_children" in children
    detail = components["ResourceDetail"]["properties"]
    assert "read live" in detail["live_children"]["description"]
    assert "live_children" in detail["live_children_error"]["description"]
