"""`Scope`: what a caller limited by (cluster, namespace) grants may see, one object at a time (`allows`), as a
queryset filter (`q`, `namespace_q`) and as a raw query's condition (`sql`); one limit covering another; a grant's
written form."""

from __future__ import annotations

import pickle

import pytest

from reconcilers.models import Resource
from reconcilers.services.selectors.filters import namespace_q
from reconcilers.services.selectors.scope import Scope, grant_text, parse_grant, scope_allows
from tests.opsconsole.api import factories as f


def test_a_grant_of_one_cluster_allows_that_cluster_only_and_one_of_every_cluster_allows_all():
    scope = Scope.of(["prod/team-a", "shared", "prod/"])
    assert scope.allows("prod", "team-a") and not scope.allows("staging", "team-a")
    assert scope.allows("staging", "shared") and scope.allows("prod", "shared")
    assert scope.allows("prod", "") and not scope.allows("staging", "")  # prod's cluster scope only
    assert not scope.allows("prod", "team-b")
    assert scope.allows_cluster("staging")  # `shared` of every cluster
    assert not Scope.of(["prod/team-a"]).allows_cluster("staging")
    assert scope_allows(None, "any", "thing") and not scope_allows(frozenset({"x"}), "prod", "y")


def test_a_scope_is_the_set_of_its_namespaces_but_equal_only_by_its_pairs():
    a, b = Scope.of(["prod/team-a"]), Scope.of(["staging/team-a"])
    assert set(a) == {"team-a"} and "team-a" in a and sorted(a) == ["team-a"]
    assert a != b
    assert Scope.of(["team-a"]) == frozenset({"team-a"}) and a != frozenset({"team-a"})
    assert hash(Scope.of(["team-a"])) == hash(frozenset({"team-a"})) and len({Scope.of(["x"]), frozenset({"x"})}) == 1
    assert pickle.loads(pickle.dumps(a)) == a and pickle.loads(pickle.dumps(a)).pairs == a.pairs
    assert a.text() == "prod/team-a" and Scope.of(["b", "prod/a"]).text() == "b,prod/a"


def test_covers_holds_only_when_every_pair_of_the_other_is_inside():
    wide = Scope.of(["team-a", "prod/team-b"])
    assert wide.covers(Scope.of(["prod/team-a", "staging/team-a", "prod/team-b"]))
    assert wide.covers(Scope.of(["team-a"]))
    assert not wide.covers(Scope.of(["team-b"]))  # team-b of every cluster is more than prod's
    assert not Scope.of(["prod/team-a"]).covers(Scope.of(["team-a"]))
    assert not Scope.of(["prod/team-a"]).covers(frozenset({"team-a"}))


def test_grants_are_written_cluster_slash_namespace_or_namespace_alone():
    assert parse_grant("prod/team-a") == ("prod", "team-a") and parse_grant("team-a") == ("", "team-a")
    assert parse_grant("prod/") == ("prod", "") and parse_grant("") == ("", "")
    assert grant_text("prod", "team-a") == "prod/team-a" and grant_text("", "x") == "x"


@pytest.mark.django_db
def test_the_queryset_filter_keeps_the_rows_of_the_granted_pairs_only():
    keep = {f.resource("a", "team-a", cluster="prod").pk, f.resource("s", "shared", cluster="staging").pk,
            f.resource("d", "shared").pk}
    f.resource("b", "team-a", cluster="staging")
    f.resource("c", "team-b", cluster="prod")
    f.resource("e", "team-a")
    scope = Scope.of(["prod/team-a", "shared"])
    assert set(Resource.objects.filter(namespace_q(scope)).values_list("pk", flat=True)) == keep
    assert set(Resource.objects.filter(scope.q()).values_list("pk", flat=True)) == keep
    assert not Resource.objects.filter(namespace_q(Scope(()))).exists()
    where, params = scope.sql()
    assert set(Resource.objects.extra(where=[where], params=params).values_list("pk", flat=True)) == keep


@pytest.mark.django_db
def test_a_trace_of_a_run_in_a_cluster_one_cannot_see_is_refused():
    from django.utils import timezone

    from reconcilers.models import Span
    from reconcilers.services.selectors.traces import TraceNotVisible, trace_places, trace_spans

    now = timezone.now()
    for trace, key in (("a" * 32, "staging/cache.example.com/v1alpha1/memcacheds/team-a/web"),
                       ("b" * 32, "cache.example.com/v1alpha1/memcacheds/team-a/web")):
        Span.objects.create(trace_id=trace, span_id="1" * 16, name="reconcile", start_time=now, end_time=now,
                            duration_ms=1.0, attributes={"opsconsole.key": key})
    assert trace_places("a" * 32, Span.objects.filter(trace_id="a" * 32)) == {("staging", "team-a")}
    with pytest.raises(TraceNotVisible):
        trace_spans("a" * 32, namespaces=Scope.of(["prod/team-a"]))
    assert len(trace_spans("a" * 32, namespaces=Scope.of(["staging/team-a"]))) == 1
    assert len(trace_spans("a" * 32, namespaces=Scope.of(["team-a"]))) == 1
    with pytest.raises(TraceNotVisible):
        trace_spans("b" * 32, namespaces=Scope.of(["staging/team-a"]))  # the default cluster's
    assert len(trace_spans("b" * 32, namespaces=Scope.of(["default/team-a"]))) == 1


def test_a_chain_status_shows_a_limited_caller_the_breaks_and_counts_of_its_clusters_namespaces_only():
    from django.utils import timezone

    from reconcilers.services.audit_status import RECORD_WIDE, ChainStatus

    status = ChainStatus(False, 3, 9, ["s", "p", "r"], timezone.now(), 0.1,
                         found=(("staging", "team-a", "s"), ("prod", "team-a", "p"), (RECORD_WIDE, RECORD_WIDE, "r")),
                         per_namespace={("staging", "team-a"): (1, 3), ("prod", "team-a"): (2, 6)})
    prod = status.visible_to(Scope.of(["prod/team-a"]))
    assert (prod.ok, prod.breaks, prod.chains, prod.transitions) == (False, ["p"], 2, 6)
    every = status.visible_to(Scope.of(["team-a"]))
    assert (every.breaks, every.chains, every.transitions) == (["s", "p"], 3, 9)
    other = status.visible_to(Scope.of(["staging/team-b"]))
    assert (other.ok, other.breaks, other.chains) == (True, [], 0)
    assert status.visible_to(None) is status
