"""core/meta: the controller ownerReference of an object or its metadata, RFC 3339 timestamps written as
Kubernetes writes them and read back from any RFC 3339 form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from reconcilers.core.meta import controller_ref, now_rfc3339, parse_rfc3339, rfc3339

OWNER = {"apiVersion": "cache.example.com/v1alpha1", "kind": "Memcached", "name": "m", "uid": "u-1",
         "controller": True}
OTHER = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u-2"}


def test_controller_ref_reads_an_object_or_its_metadata() -> None:
    meta = {"name": "d", "ownerReferences": [OTHER, OWNER]}
    assert controller_ref({"metadata": meta}) == OWNER
    assert controller_ref(meta) == OWNER


@pytest.mark.parametrize("obj", [
    None,
    {},
    {"metadata": {"name": "d"}},
    {"metadata": {"name": "d", "ownerReferences": None}},
    {"metadata": {"name": "d", "ownerReferences": [OTHER, {**OWNER, "controller": False}]}},
    {"metadata": {"name": "d", "ownerReferences": ["not a reference"]}},
    {"ownerReferences": [OTHER]},
])
def test_controller_ref_is_none_without_a_controller_reference(obj) -> None:
    assert controller_ref(obj) is None


def test_rfc3339_writes_seconds_or_microseconds_in_utc() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert rfc3339(moment) == "2030-01-02T03:04:05Z"
    assert rfc3339(moment, micro=True) == "2030-01-02T03:04:05.678901Z"
    plus_two = moment.astimezone(timezone(timedelta(hours=2)))
    assert rfc3339(plus_two) == "2030-01-02T03:04:05Z"


def test_a_naive_datetime_is_taken_as_utc() -> None:
    assert rfc3339(datetime(2030, 1, 2, 3, 4, 5)) == "2030-01-02T03:04:05Z"
    assert rfc3339(datetime(2030, 1, 2, 3, 4, 5, 6), micro=True) == "2030-01-02T03:04:05.000006Z"


def test_now_rfc3339_is_now() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    stamp = now_rfc3339()
    assert stamp.endswith("Z") and "." not in stamp
    parsed = parse_rfc3339(stamp)
    assert parsed is not None and before <= parsed <= datetime.now(UTC)
    assert len(now_rfc3339(micro=True)) == len("2030-01-02T03:04:05.000000Z")


@pytest.mark.parametrize("text, expected", [
    ("2030-01-02T03:04:05Z", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("2030-01-02T03:04:05.678901Z", datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)),
    ("2030-01-02T03:04:05.5Z", datetime(2030, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
    ("2030-01-02T05:04:05+02:00", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("2030-01-01T22:04:05.25-05:00", datetime(2030, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)),
    ("2030-01-02T03:04:05", datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
])
def test_parse_rfc3339_reads_z_offsets_and_fractions(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected and parsed.tzinfo is not None


@pytest.mark.parametrize("value", [None, "", "yesterday", "2030-13-01T00:00:00Z", "2030-01-02T03:04:05ZZ", 1234,
                                   datetime(2030, 1, 2, tzinfo=UTC)])
def test_parse_rfc3339_is_none_for_anything_else(value) -> None:
    assert parse_rfc3339(value) is None


def test_what_rfc3339_writes_parse_rfc3339_reads() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert parse_rfc3339(rfc3339(moment, micro=True)) == moment
    assert parse_rfc3339(rfc3339(moment)) == moment.replace(microsecond=0)
