"""jsonfast: the engine's hot-path JSON decodes what the standard library decodes and never refuses what it
encoded (reconcilers.engine.jsonfast)."""

import json
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from reconcilers.engine import jsonfast

DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "mc-1", "namespace": "bench", "resourceVersion": "42", "labels": {"app": "é"},
                           "annotations": {"note": "ünïcode ✓"}},
              "spec": {"replicas": 3, "paused": False, "ratio": 0.25, "selector": None, "items": [1, "two", {}]}}


def test_round_trip_equals_the_standard_librarys():
    encoded = jsonfast.dumps(DEPLOYMENT)
    assert isinstance(encoded, bytes) and b": " not in encoded and b", " not in encoded  # compact
    assert jsonfast.loads(encoded) == DEPLOYMENT == json.loads(encoded)
    assert jsonfast.loads(json.dumps(DEPLOYMENT)) == DEPLOYMENT  # what another encoder wrote (str in, \\u escapes)


def test_what_orjson_refuses_is_encoded_by_the_standard_library():
    big = {"spec": {"huge": 2**70}, 1: "a non-string key"}
    assert json.loads(jsonfast.dumps(big)) == {"spec": {"huge": 2**70}, "1": "a non-string key"}


def test_datetimes_and_dataclasses_go_to_default_as_with_json():
    @dataclass
    class Point:
        x: int

    seen = []

    def default(value):
        seen.append(type(value).__name__)
        return str(value)

    moment = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)
    assert jsonfast.loads(jsonfast.dumps({"at": moment, "p": Point(1)}, default=default)) == {
        "at": str(moment), "p": str(Point(1))}
    assert seen == ["datetime", "Point"]
    with pytest.raises(TypeError):
        jsonfast.dumps({"at": moment})  # no default: refused, as json refuses it


@pytest.mark.parametrize("bad", [b"{not json", b"", b'{"a": NaN}', "[1,"])
def test_malformed_input_raises_a_value_error(bad):
    with pytest.raises(ValueError):
        jsonfast.loads(bad)
    assert issubclass(jsonfast.DecodeError, json.JSONDecodeError)
