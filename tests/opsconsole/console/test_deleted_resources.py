"""Deleted resources stay on record in the console: the overview's Deleted state counts them (the live total does
not), the table lists them when Deleted (or `deleted=1`) is asked for and never otherwise, their detail page
shows them as deleted; an object deleted and re-created under the same name is two rows."""

from __future__ import annotations

from django.utils import timezone

from tests.opsconsole.api import factories as f


def _deleted(name: str, namespace: str = "default"):
    return f.resource(name, namespace, phase="Deleted", deleted=True, deleted_at=timezone.now())


def test_deleted_resources_count_in_the_deleted_state_and_leave_the_live_lists(as_role):
    old = _deleted("again")
    new = f.resource("again")
    _deleted("gone")
    client = as_role("viewer")

    html = client.get("/").content.decode()
    assert "<title>Deleted (terminal): 2 resources" in html and "<title>Running (ready): 1 resource," in html
    assert '<span class="muted small">1 resource</span>' in html  # the card's total: live resources only

    listed = client.get("/resources/?kind=Memcached").content.decode()
    assert f"/resources/{new.pk}/" in listed and f"/resources/{old.pk}/" not in listed
    for query in ("kind=Memcached&phase=Deleted", "kind=Memcached&deleted=1"):
        listed = client.get(f"/resources/?{query}").content.decode()
        assert f"/resources/{old.pk}/" in listed, query
    both = client.get("/resources/?q=again&deleted=1").content.decode()
    assert f"/resources/{old.pk}/" in both and f"/resources/{new.pk}/" in both

    detail = client.get(f"/resources/{old.pk}/").content.decode()
    assert "<dt>Deleted</dt>" in detail
