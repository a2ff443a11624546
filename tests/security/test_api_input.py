"""Bad input to the REST API: malformed JSON (broken, not an object, nested past the parser's recursion limit,
numbers too long to convert, NaN, invalid UTF-8), wrong types, missing and unknown fields, strings with NUL,
oversized bodies and unknown paths. Every answer is a 4xx with the API's JSON error body (never a 5xx, never
an HTML page), names the problem, and an action attempt is in the action record as rejected or refused."""

from __future__ import annotations

import json
import uuid

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from opsconsole.accounts.models import ApiToken
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db
KEY = "cache.example.com/v1alpha1/memcacheds/default/m1"


def actions(resource_id: int, token_id: int) -> list[tuple[str, str, str]]:
    """(method, path, audited action name) of every action endpoint."""
    return [
        ("post", f"/api/v1/resources/{resource_id}/reconcile", "resource.reconcile"),
        ("post", "/api/v1/resources/reconcile", "resource.reconcile_bulk"),
        ("post", "/api/v1/queue/retry-now", "queue.retry_now"),
        ("post", "/api/v1/queue/reset-backoff", "queue.reset_backoff"),
        ("post", "/api/v1/tokens", "token.create"),
        ("delete", f"/api/v1/tokens/{token_id}", "token.revoke"),
    ]


def assert_json_error(response, status: int | set[int], *, code: str | None = None) -> dict:
    """A 4xx answered with the API's error body (status, code, message) as JSON."""
    wanted = {status} if isinstance(status, int) else status
    assert response.status_code in wanted, (response.status_code, response.content[:500])
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert body["status"] == response.status_code and body["message"], body
    if code is not None:
        assert body["code"] == code, body
    return body


def last_record() -> ActionRecord:
    return ActionRecord.objects.order_by("-id").first()


@pytest.fixture
def targets(as_user, queue):
    """An admin (token auth) and the ids the action paths need."""
    client = as_user("admin", token=True)
    res = f.resource("bad-input")
    from opsconsole.accounts.tokens import token_create

    token = token_create(client.user, name="victim").token
    return client, res, token


MALFORMED = {
    "broken": b'{"reason": ',
    "trailing-garbage": b'{"reason": "r"} x',
    "nan": b'{"reason": NaN}',
    "infinity": b'{"reason": "r", "expires_in_days": Infinity}',
    "too-many-digits": b'{"reason": "r", "expires_in_days": ' + b"9" * 5000 + b"}",
    "invalid-utf8": b'{"reason": "\xff\xfe"}',
    "deeply-nested": b"[" * 100_000 + b"]" * 100_000,
    "deeply-nested-object": b'{"reason": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
}


@pytest.mark.parametrize("body", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_json_is_a_400_parse_error_on_every_action_and_recorded(targets, body):
    client, res, token = targets
    for method, path, action in actions(res.pk, token.pk):
        before = ActionRecord.objects.count()
        response = getattr(client, method)(path, body, content_type="application/json")
        if method == "delete" and response.status_code == 204:
            continue  # DELETE takes no body: a body is not read, the token is revoked
        assert_json_error(response, 400, code="parse_error")
        assert ActionRecord.objects.count() == before + 1, path
        record = last_record()
        assert (record.action, record.outcome, record.status_code) == (action, "rejected", 400)
    assert not ReconcileRequest.objects.exists()


NOT_AN_OBJECT = ["[1, 2]", '"reason"', "null", "42", "true"]


@pytest.mark.parametrize("body", NOT_AN_OBJECT)
def test_a_json_body_that_is_not_an_object_is_a_400_naming_it(targets, body):
    client, res, token = targets
    for method, path, _ in actions(res.pk, token.pk):
        if method == "delete":
            continue
        response = client.post(path, body, content_type="application/json")
        err = assert_json_error(response, 400, code="invalid")
        assert err["fields"], err
        assert last_record().outcome == "rejected"


WRONG_TYPES = [
    ("resource", {"reason": ["a"]}, "reason"),
    ("resource", {"reason": {"a": 1}}, "reason"),
    ("resource", {"reason": True}, "reason"),
    ("resource", {"reason": None}, "reason"),
    ("resource", {"reason": "x" * 2001}, "reason"),
    ("resource", {"reason": "nul \x00 inside"}, "reason"),
    ("resource", {}, "reason"),
    ("bulk", {"kind": None, "selector": "a=b", "reason": "r"}, "kind"),
    ("bulk", {"kind": "Memcached", "selector": ["a=b"], "reason": "r"}, "selector"),
    ("bulk", {"kind": "Memcached", "phase": {"x": 1}, "reason": "r"}, "phase"),
    ("bulk", {"kind": "Memcached", "selector": "a=b", "namespace": "n" * 64, "reason": "r"}, "namespace"),
    ("bulk", {"kind": "Memcached", "selector": "===", "reason": "r"}, "selector"),
    ("bulk", {"selector": "a=b", "reason": "r"}, "kind"),
    ("retry", {"key": {"k": 1}}, "key"),
    ("retry", {"key": "not/a/key"}, "key"),
    ("retry", {"key": "a/v1/b/ns/" + "n" * 2000}, "key"),
    ("retry", {}, "key"),
    ("reset", {"key": 7.5}, "key"),
    ("reset", {"key": KEY, "reason": ["why"]}, "reason"),
    ("tokens", {"name": ["ci"]}, "name"),
    ("tokens", {"name": "ci", "expires_in_days": "soon"}, "expires_in_days"),
    ("tokens", {"name": "ci", "expires_in_days": 0}, "expires_in_days"),
    ("tokens", {"name": "ci", "expires_in_days": 10**30}, "expires_in_days"),
    ("tokens", {"name": "ci", "expires_in_days": 1.5}, "expires_in_days"),
    ("tokens", {"name": "ci", "username": {"u": 1}}, "username"),
    ("tokens", {"name": ""}, "name"),
    ("tokens", {}, "name"),
]


def test_wrong_types_missing_and_out_of_range_fields_are_a_400_naming_the_field(targets):
    client, res, _ = targets
    paths = {"resource": f"/api/v1/resources/{res.pk}/reconcile", "bulk": "/api/v1/resources/reconcile",
             "retry": "/api/v1/queue/retry-now", "reset": "/api/v1/queue/reset-backoff", "tokens": "/api/v1/tokens"}
    tokens_before = ApiToken.objects.count()
    for endpoint, body, field in WRONG_TYPES:
        response = client.post(paths[endpoint], body, format="json")
        err = assert_json_error(response, 400, code="invalid")
        assert field in err["fields"], (endpoint, body, err)
        assert err["message"].startswith(field), err  # the message names the field too
        record = last_record()
        assert (record.outcome, record.status_code, record.path) == ("rejected", 400, paths[endpoint])
    assert not ReconcileRequest.objects.exists() and ApiToken.objects.count() == tokens_before
    # the NUL the reason carried is kept in the record, in a form the database can store
    assert ActionRecord.objects.filter(reason="nul \ufffd inside", outcome="rejected").count() == 1


def test_a_body_over_the_upload_limit_is_a_413_on_every_action_recorded_and_not_parsed(targets, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    client, res, token = targets
    body = json.dumps({"reason": "r" * (100 * 1024), "name": "n", "key": KEY, "kind": "Memcached",
                       "selector": "a=b"})
    for method, path, action in actions(res.pk, token.pk):
        response = getattr(client, method)(path, body, content_type="application/json")
        if method == "delete" and response.status_code == 204:
            continue
        err = assert_json_error(response, 413, code="payload_too_large")
        assert "65536" in err["message"], err  # names the limit
        record = last_record()
        assert (record.action, record.outcome, record.status_code) == (action, "rejected", 413)
        assert record.reason == ""  # the oversized body was not read into the record
    assert not ReconcileRequest.objects.exists()
    assert not ApiToken.objects.filter(name="n").exists()


def test_the_default_upload_limit_applies_to_json_bodies(targets):
    client, res, _ = targets
    limit = django_settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = b'{"reason": "' + b"r" * (limit + 1) + b'"}'
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", body, content_type="application/json")
    assert_json_error(response, 413, code="payload_too_large")


def test_an_oversized_body_from_nobody_is_refused_without_being_read(db, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    res = f.resource("anon-big")
    response = APIClient().post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "r" * 5000}, format="json")
    assert_json_error(response, {401, 413})
    record = last_record()
    assert record.actor == "" and record.outcome in ("refused", "rejected") and record.reason == ""


@pytest.mark.parametrize(("content_type", "body"), [
    ("text/plain", b"reason=r"),
    ("application/xml", b"<reason>r</reason>"),
    ("application/x-www-form-urlencoded", b"reason=" + b"r" * 300_000),
])
def test_a_body_of_another_media_type_is_a_4xx_with_a_json_body(targets, settings, content_type, body):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64 * 1024
    client, res, _ = targets
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", body, content_type=content_type)
    assert_json_error(response, {413, 415})
    assert last_record().outcome == "rejected"


def test_unknown_fields_are_ignored_and_cannot_set_who_or_what(as_user, queue, kapi, namespace, reconcilers):
    from reconcilers.engine import kube

    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    obj = kube.create_object(kapi, GADGET, gadget(namespace, "unknown-fields", mode="ok"))
    res = f.resource("unknown-fields", namespace, uid=obj["metadata"]["uid"],
                     kind={"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural,
                           "kind": GADGET.kind})
    client = as_user("operator", token=True)
    forged = {"reason": "real", "actor": "user:root", "state": "succeeded", "token": "chosen-token",
              "resource": 999, "key": "x/v1/y/z/w", "idempotency_key": "k"}
    response = client.post(f"/api/v1/resources/{res.pk}/reconcile", forged, format="json")
    assert response.status_code == 202, response.content
    req = ReconcileRequest.objects.get()
    assert (req.actor, req.state, req.key, req.resource_id) == (f"user:{client.user.username}", "requested",
                                                                res.key, res.pk)
    assert req.token != "chosen-token" and req.idempotency_key in ("", None)
    assert last_record().actor == client.user.username

    other = f.user(f"victim-{uuid.uuid4().hex[:6]}", "viewer")
    made = client.post("/api/v1/tokens", {"name": "mine", "user": other.pk, "hash": "0" * 64, "prefix": "oc_forged",
                                          "revoked_at": None, "last_used_at": "2020-01-01T00:00:00Z"}, format="json")
    assert made.status_code == 201, made.content
    token = ApiToken.objects.get(pk=made.json()["id"])
    assert token.user_id == client.user.pk and token.hash != "0" * 64 and token.prefix != "oc_forged"
    assert token.last_used_at is None and not ApiToken.objects.filter(user=other).exists()


def test_a_bad_idempotency_key_is_a_400_naming_the_header(targets):
    client, res, _ = targets
    for value in ("has space", "x" * 201, "ünïcode"):
        response = client.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "r"}, format="json",
                               HTTP_IDEMPOTENCY_KEY=value.encode().decode("latin-1"))
        assert "Idempotency-Key" in assert_json_error(response, 400)["fields"]


#: each read endpoint and the query parameters it takes (plus the paginator's and one it does not know)
READS = {
    "/api/v1/resources": ["kind", "namespace", "phase", "selector", "search", "stuck_for", "generation_lag"],
    "/api/v1/transitions": ["kind", "namespace", "name", "actor", "from_phase", "to_phase", "after", "before",
                            "since"],
    "/api/v1/transitions.csv": ["namespace", "actor", "after", "since", "limit"],
    "/api/v1/transitions.jsonl": ["kind", "to_phase", "before", "limit"],
    "/api/v1/metrics/summary": ["window", "start", "end", "kind"],
    "/api/v1/tokens": ["all", "username"],
    "/api/v1/actions": ["actor", "action", "outcome"],
    "/api/v1/kinds": [],
    "/api/v1/reconcile-requests": [],
}
HOSTILE = ["\x00", "a\x00b", "%", "\u202e\u0644\u0627", "🔥" * 300, "x" * 5000, "-1", "1e999", "[]"]


def test_hostile_query_parameters_never_get_a_5xx_from_a_read(admin):
    f.transition(f.resource("q"), "Pending")
    seen: dict[int, int] = {}
    for path, params in READS.items():
        for param in [*params, "cursor", "page_size", "unknown"]:
            for value in HOSTILE:
                response = admin.get(path, {param: value})
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                assert response.status_code < 500, (path, param, value, response.content[:300])
                if response.status_code >= 400:
                    assert_json_error(response, response.status_code)
    assert seen.get(400, 0) > 0 and seen.get(200, 0) > 0  # some were refused, some filters simply matched none
    print(f"\nBAD-INPUT api-query: {sum(seen.values())} hostile reads, answers {dict(sorted(seen.items()))}")


@pytest.mark.parametrize("path", ["/api/v1/nope", "/api/v1/resources/", "/api/v1/resources/1/nope",
                                  "/api/v2/resources", "/api/v1/tokens/1/extra"])
def test_an_unknown_api_path_is_a_json_404(admin, path):
    assert_json_error(admin.get(path), 404)


def test_a_wrong_method_is_a_json_405(admin):
    res = f.resource("m")
    for method, path in (("get", f"/api/v1/resources/{res.pk}/reconcile"), ("put", "/api/v1/resources"),
                         ("delete", "/api/v1/queue/retry-now"), ("patch", "/api/v1/tokens")):
        assert_json_error(getattr(admin, method)(path), 405)


def test_django_error_handlers_answer_json_under_the_api_and_pages_elsewhere(rf):
    from django.urls import get_resolver

    from opsconsole.api.exceptions import api_not_found, api_server_error

    resolver = get_resolver()
    assert resolver.resolve_error_handler(404) is api_not_found
    assert resolver.resolve_error_handler(500) is api_server_error
    crash = api_server_error(rf.get("/api/v1/resources"))
    assert crash.status_code == 500 and crash["Content-Type"] == "application/json"
    assert json.loads(crash.content) == {"status": 500, "code": "error", "message": "Internal server error."}
    page = api_server_error(rf.get("/resources/"))
    assert page.status_code == 500 and page["Content-Type"].startswith("text/html")
