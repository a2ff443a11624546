"""Consistent hashing with bounded loads (reconcilers/engine/shards/ring.py): deterministic, bounded, and moving
about 1/N of the keys when a shard joins or leaves."""

from __future__ import annotations

import math
import uuid

import pytest

from reconcilers.engine.shards.ring import Ring, loads, moved, point

KEYS = [str(uuid.UUID(int=i * 7919 + 17)) for i in range(6000)]


def test_the_assignment_depends_only_on_the_keys_and_the_shards() -> None:
    one = Ring(["a", "b", "c"]).assign(KEYS)
    other = Ring(["c", "a", "b", "a"]).assign(reversed(KEYS))  # another replica's order, a duplicate
    assert one == other and set(one) == set(KEYS)
    assert point("x") == point("x") and point("x") != point("y")


@pytest.mark.parametrize("shards", [2, 3, 4, 7])
def test_no_shard_holds_more_than_its_bound(shards: int) -> None:
    names = [f"s{i}" for i in range(shards)]
    counts = loads(Ring(names).assign(KEYS, load_factor=1.25), names)
    assert sum(counts.values()) == len(KEYS)
    assert max(counts.values()) <= math.ceil(1.25 * len(KEYS) / shards)
    assert min(counts.values()) > 0.5 * len(KEYS) / shards  # the virtual nodes spread it; the bound caps it


def test_a_fourth_shard_joining_moves_at_most_30_percent_of_the_keys() -> None:
    three = Ring(["a", "b", "c"]).assign(KEYS)
    four = Ring(["a", "b", "c", "d"]).assign(KEYS)
    share = moved(three, four) / len(KEYS)
    assert 0.2 <= share <= 0.30  # the ideal is 1/4: what the new shard takes, and a few keys that spilled
    assert loads(four, "abcd")["d"] >= 0.2 * len(KEYS)


def test_a_shard_leaving_moves_its_own_keys_and_few_others() -> None:
    three = Ring(["a", "b", "c"]).assign(KEYS)
    two = Ring(["a", "b"]).assign(KEYS)
    had = loads(three, "abc")["c"]
    assert all(two[key] in ("a", "b") for key in KEYS)
    others_moved = sum(1 for key in KEYS if three[key] != "c" and two[key] != three[key])
    assert moved(three, two) == had + others_moved
    assert others_moved <= 0.05 * len(KEYS)  # greedy reassignment would reshuffle most keys


def test_a_new_key_keeps_the_others_where_they_were_while_no_shard_is_full() -> None:
    ring = Ring(["a", "b", "c"])
    before = ring.assign(KEYS)
    after = ring.assign([*KEYS, "a-new-uid"])
    assert moved(before, after) <= 3  # a key that spilled past a full shard may follow the bound


def test_the_preference_list_names_every_shard_once_starting_with_the_plain_owner() -> None:
    ring = Ring(["a", "b", "c", "d"])
    for key in KEYS[:50]:
        order = ring.preference(key)
        assert sorted(order) == ["a", "b", "c", "d"] and order[0] == ring.owner(key)


def test_bad_rings_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        Ring([])
    with pytest.raises(ValueError, match="load_factor"):
        Ring(["a"]).assign(KEYS, load_factor=0.9)
    assert Ring(["a"]).assign([]) == {}
