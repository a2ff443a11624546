"""The overview's kinds in order (issue 43): those with transitions in the last hour, then the last day, first;
the rest keep their registration order and are folded. A quiet installation folds nothing it would then hide
entirely: with no activity anywhere, the kinds with resources are shown; with no resources either, all are."""

from __future__ import annotations

from opsconsole.console.views.overview import machines_ordered


def kind(name: str, hour: int = 0, day: int = 0, total: int = 0) -> dict:
    return {"kind": name, "moves_hour": hour, "moves_day": day, "total": total}


def shown(machines: list[dict]) -> list[tuple[str, bool]]:
    return [(m["kind"], m["shown"]) for m in machines_ordered(machines)]


def test_kinds_with_activity_come_first_and_the_rest_are_folded_in_their_order():
    machines = [kind("Memcached", total=40), kind("Tenant", day=2, total=1), kind("KVStore"),
                kind("StaticSite", hour=3, day=9, total=1)]
    assert shown(machines) == [("StaticSite", True), ("Tenant", True), ("Memcached", False), ("KVStore", False)]


def test_without_activity_the_kinds_with_resources_are_shown_and_without_resources_all():
    assert shown([kind("A"), kind("B", total=2)]) == [("A", False), ("B", True)]
    assert shown([kind("A"), kind("B")]) == [("A", True), ("B", True)]
