"""`settle()` freezes what a process's start-up left alive out of the cyclic collector's reach, and nothing else
changes: garbage cycles made before it are collected, frozen objects are still freed by reference counting."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from opsconsole.gcsettle import settle


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # this test process goes on as before


def test_settle_freezes_what_survives_and_a_later_call_freezes_what_came_since(unfrozen: None) -> None:
    first = settle()
    # another thread of the test process may free a frozen object meanwhile (the count then drops a little)
    assert first > 0 and first - 1000 < gc.get_freeze_count() <= first
    assert gc.get_count()[0] < 100  # the young generation starts (nearly) empty after the collection
    kept = [_Node() for _ in range(1000)]  # tracked containers (a dict of atoms alone is not tracked)
    assert settle() >= first + len(kept) // 2  # (less what other threads freed meanwhile)


def test_a_cycle_made_before_settle_is_collected_not_frozen(unfrozen: None) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    ref = weakref.ref(a)
    del a, b
    settle()
    assert ref() is None


def test_a_frozen_object_is_still_freed_when_its_last_reference_goes(unfrozen: None) -> None:
    node = _Node()
    ref = weakref.ref(node)
    settle()
    assert ref() is node
    del node
    assert ref() is None


def test_the_worker_main_process_settles_before_it_forks(unfrozen: None) -> None:
    from celery import signals

    from opsconsole.celery import _settle_before_fork

    receivers = [r() if isinstance(r, weakref.ReferenceType) else r for _key, r in signals.worker_init.receivers]
    assert _settle_before_fork in receivers
    _settle_before_fork()
    assert gc.get_freeze_count() > 0
