"""`manage.py grant add|remove|list`: grants written `cluster/namespace` or `namespace`, checked before any is
written, the last one removed only with --unlimit, every change and refusal on the action record; and what a
user's grants make of `user_namespaces`, `namespace_allowed`, `key_allowed` and `user_covers`."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from opsconsole.accounts.models import NamespaceGrant
from opsconsole.accounts.roles import key_allowed, namespace_allowed, user_covers, user_namespaces
from reconcilers.models import ActionRecord
from reconcilers.services.selectors.scope import Scope
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db


def grant(*args: str) -> str:
    out = io.StringIO()
    call_command("grant", *args, stdout=out)
    return out.getvalue()


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


def test_add_list_and_remove_grants_of_a_cluster_and_of_every_cluster():
    alice = f.user("alice", "viewer")
    assert "added: prod/team-a, team-b, prod/" in grant("add", "--user", "alice", "prod/team-a", "team-b", "prod/")
    record = last_record()
    assert (record.action, record.auth, record.outcome, record.target) == ("grant.add", "command", "allowed",
                                                                           "user:alice")
    assert record.detail["now"] == ["prod/", "prod/team-a", "team-b"]
    assert grant("list", "--user", "alice").split() == ["prod/", "prod/team-a", "team-b"]
    assert "added: nothing" in grant("add", "--user", "alice", "team-b")  # already there
    assert user_namespaces(f.User.objects.get(pk=alice.pk)) == Scope.of(["prod/team-a", "team-b", "prod/"])
    assert "removed: team-b" in grant("remove", "--user", "alice", "team-b")
    assert set(NamespaceGrant.objects.filter(user=alice).values_list("cluster", "namespace")) == {
        ("prod", "team-a"), ("prod", "")}


def test_a_bad_grant_adds_nothing_and_is_recorded_as_rejected():
    f.user("bob", "viewer")
    for bad in ("Prod/team-a", "prod/Team_A", "a/b/c"):
        with pytest.raises(CommandError):
            grant("add", "--user", "bob", "team-a", bad)
        assert (last_record().action, last_record().status_code) == ("grant.add", 400)
    assert not NamespaceGrant.objects.exists()
    with pytest.raises(CommandError, match="No such user"):
        grant("add", "--user", "nobody", "team-a")
    assert last_record().target == "user:nobody" and last_record().status_code == 404


def test_removing_the_last_grant_needs_unlimit_since_it_lifts_every_limit():
    carol = f.user("carol", "viewer", ["prod/team-a"])
    with pytest.raises(CommandError, match="--unlimit"):
        grant("remove", "--user", "carol", "prod/team-a")
    assert last_record().status_code == 409 and NamespaceGrant.objects.filter(user=carol).count() == 1
    assert "not limited" in grant("remove", "--user", "carol", "prod/team-a", "--unlimit")
    assert user_namespaces(f.User.objects.get(pk=carol.pk)) is None


def test_namespace_allowed_and_covers_follow_the_cluster():
    prod_a = f.user("prod-a", "admin", ["prod/team-a"])
    every_a = f.user("every-a", "admin", ["team-a"])
    assert namespace_allowed(prod_a, "team-a", "prod") and not namespace_allowed(prod_a, "team-a", "staging")
    assert not namespace_allowed(prod_a, "team-a")  # the default cluster
    assert namespace_allowed(every_a, "team-a", "staging") and namespace_allowed(every_a, "team-a")
    assert user_covers(every_a, prod_a) and not user_covers(prod_a, every_a)
    assert not user_covers(prod_a, f.user("staging-a", "viewer", ["staging/team-a"]))


def test_a_key_is_allowed_in_the_cluster_its_prefix_names():
    prod_a = f.user("key-prod-a", "viewer", ["prod/team-a", "prod/"])
    assert key_allowed(prod_a, "prod/cache.example.com/v1alpha1/memcacheds/team-a/web")
    assert not key_allowed(prod_a, "staging/cache.example.com/v1alpha1/memcacheds/team-a/web")
    assert not key_allowed(prod_a, "cache.example.com/v1alpha1/memcacheds/team-a/web")  # the default cluster's
    assert key_allowed(prod_a, "prod/tenancy.example.com/v1alpha1/tenants//acme")
    assert not key_allowed(prod_a, "not a key") and key_allowed(f.user("free", "viewer"), "not a key")
