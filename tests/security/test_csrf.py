"""CSRF and tokens: every POST form the console renders (collected from the pages themselves, as a superuser
sees them, with the login page and Django's admin forms) is refused with 403 when posted without its CSRF token
and accepted with it; a cross-origin POST carrying a valid token is refused too. The API: a session-
authenticated action without the CSRF header is refused (and recorded), a Bearer token needs none, and a bad
token never falls back to the session. API tokens are stored hashed: after creating and using some, the raw
secrets are in no table of the database and in no log line."""

from __future__ import annotations

import logging
import uuid
from html.parser import HTMLParser

import pytest
from django.apps import apps
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from reconcilers.engine import kube
from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.reconcilers.testkinds import GADGET, gadget

pytestmark = pytest.mark.django_db(transaction=True)
GADGET_KIND = {"group": GADGET.group, "version": GADGET.version, "plural": GADGET.plural, "kind": GADGET.kind}


class Forms(HTMLParser):
    """The POST forms of a page: action and the fields each would send (inputs, textareas, selects)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.forms: list[dict] = []
        self._form: dict | None = None
        self._select: str | None = None
        self.page = page

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "form" and a.get("method", "get").lower() == "post":
            self._form = {"page": self.page, "action": a.get("action") or self.page, "fields": {}}
            self.forms.append(self._form)
        elif tag == "form":
            self._form = None
        elif self._form is not None and tag in ("input", "textarea", "button") and a.get("name"):
            if a.get("type") in ("checkbox", "radio") and "checked" not in a:
                return
            self._form["fields"].setdefault(a["name"], []).append(a.get("value") or "x")
        elif self._form is not None and tag == "select" and a.get("name"):
            self._select = a["name"]
        elif self._form is not None and tag == "option" and self._select and a.get("value"):
            self._form["fields"].setdefault(self._select, [a["value"]])

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "select":
            self._select = None


def collect_forms(client: Client, pages: list[str]) -> list[dict]:
    found = []
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        parser = Forms(page)
        parser.feed(response.content.decode())
        found += parser.forms
    return found


@pytest.fixture
def site(kapi, queue, reconcilers, namespace, monkeypatch):
    """A superuser's console over a real Gadget, a backing-off queue key and some history."""
    from reconcilers.services.selectors import liveness

    monkeypatch.setattr(liveness, "workers_alive", lambda **_: {"workers": ["celery@test"], "error": ""})
    reconcilers(["tests.reconcilers.testkinds.GadgetReconciler"])
    obj = kube.create_object(kapi, GADGET, gadget(namespace, "csrf", mode="ok"))
    res = f.resource("csrf", namespace, kind=GADGET_KIND, uid=obj["metadata"]["uid"])
    f.transition(res, "Pending")
    queue.add_rate_limited(GADGET.request(namespace, "q").key())
    root = User.objects.create_superuser(f"root-{uuid.uuid4().hex[:6]}", password="pw")
    f.user(f"someone-{uuid.uuid4().hex[:6]}", "viewer")
    return res, root


CONSOLE_PAGES = ["/", "/resources/", "{detail}", "/audit/", "/audit/?view=actions", "/queue/"]
ADMIN_PAGES = ["/admin/", "/admin/accounts/namespacegrant/add/", "/admin/accounts/namespacegrant/",
               "/admin/auth/user/", "/admin/password_change/"]


def test_every_console_form_is_refused_without_its_csrf_token_and_accepted_with_it(site):
    res, root = site
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    pages = [p.format(detail=f"/resources/{res.pk}/") for p in CONSOLE_PAGES] + ADMIN_PAGES
    forms = collect_forms(client, pages)
    rendered = len(forms)
    anonymous = Client(enforce_csrf_checks=True)
    login_forms = collect_forms(anonymous, ["/login/", "/admin/login/"])
    actions = {form["action"].split("?")[0] for form in forms + login_forms}
    # the forms the console has: reconcile now, bulk reconcile, both queue controls, verify, log out, log in
    for wanted in (f"/resources/{res.pk}/reconcile", "/resources/reconcile", "/queue/retry-now",
                   "/queue/reset-backoff", "/audit/verify", "/logout/", "/login/"):
        assert wanted in actions, (wanted, sorted(actions))

    distinct: dict[tuple, dict] = {}
    for form in forms:  # the same form on many pages (log out) or rows (the queue controls): once each
        distinct.setdefault((form["action"].split("?")[0], tuple(sorted(form["fields"]))), form)
    forms = list(distinct.values())
    records_before = ActionRecord.objects.count()
    # logging out last: it ends the session the other forms need
    ordered = sorted(forms, key=lambda form: "logout" in form["action"])
    checked = set()
    for who, form in [(client, form) for form in ordered] + [(anonymous, form) for form in login_forms]:
        data = {k: v for k, v in form["fields"].items() if k != "csrfmiddlewaretoken"}
        assert "csrfmiddlewaretoken" in form["fields"], form  # every POST form carries the token
        refused = who.post(form["action"], data)
        assert refused.status_code == 403, form
        assert b"CSRF" in refused.content, form
        data["csrfmiddlewaretoken"] = who.cookies["csrftoken"].value
        accepted = who.post(form["action"], data)
        assert accepted.status_code != 403, (form, accepted.content[:300])
        checked.add(form["action"])
    # a POST refused for CSRF never reached its view: the records are those of the accepted posts only (a verify
    # of the chains, and a failed login, are recorded too)
    audited = {"/resources/", "/queue/", "/audit/verify"}
    accepted_actions = sum(1 for form in forms if any(form["action"].startswith(p) for p in audited))
    accepted_actions += len(login_forms)  # a login with the form's (wrong) credentials: auth.login_failed
    assert ActionRecord.objects.count() - records_before == accepted_actions
    print(f"\nSECURITY csrf: {len(checked)} distinct POST forms ({rendered + len(login_forms)} rendered on "
          f"{len(pages) + 2} pages) refused without the token, accepted with it")


def test_a_cross_origin_post_with_a_valid_token_is_refused(site):
    res, root = site
    client = Client(enforce_csrf_checks=True)
    client.force_login(root)
    client.get("/")
    token = client.cookies["csrftoken"].value
    response = client.post(f"/resources/{res.pk}/reconcile", {"reason": "r", "csrfmiddlewaretoken": token},
                           HTTP_ORIGIN="https://evil.example")
    assert response.status_code == 403 and b"CSRF" in response.content
    assert not ReconcileRequest.objects.exists()
    response = client.post(f"/resources/{res.pk}/reconcile", {"reason": "r", "csrfmiddlewaretoken": token},
                           HTTP_ORIGIN="http://testserver")
    assert response.status_code == 302


def test_api_session_actions_need_the_csrf_header_tokens_do_not_and_bad_tokens_never_fall_back(site):
    res, root = site
    from opsconsole.accounts.tokens import token_create

    session = APIClient(enforce_csrf_checks=True)
    session.force_login(root)
    path = f"/api/v1/resources/{res.pk}/reconcile"
    response = session.post(path, {"reason": "no header"}, format="json")
    assert response.status_code == 403 and "CSRF" in response.json()["message"]
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.outcome, record.reason, record.auth) == ("refused", "no header", "")
    revoke = session.delete(f"/api/v1/tokens/{token_create(root, name='x').token.pk}")
    assert revoke.status_code == 403

    session.get("/login/")
    csrf = session.cookies["csrftoken"].value
    assert session.post(path, {"reason": "header"}, format="json", HTTP_X_CSRFTOKEN=csrf).status_code == 202

    token = token_create(root, name="script").secret
    script = APIClient(enforce_csrf_checks=True)
    script.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert script.post(path, {"reason": "token"}, format="json").status_code == 202

    # a session cookie with a bad token: refused as the token, never taken as the session
    session.credentials(HTTP_AUTHORIZATION="Bearer oc_not-a-token-at-all")
    assert session.post(path, {"reason": "r"}, format="json", HTTP_X_CSRFTOKEN=csrf).status_code == 401
    # another scheme is not a token: the session is used, and with it the CSRF check
    session.credentials(HTTP_AUTHORIZATION="Basic cm9vdDpwdw==")
    assert session.post(path, {"reason": "r"}, format="json").status_code == 403
    # a token in the query string or a cookie is not a credential
    anonymous = APIClient(enforce_csrf_checks=True)
    assert anonymous.post(f"{path}?token={token}", {"reason": "r"}, format="json").status_code == 401
    anonymous.cookies["token"] = token
    assert anonymous.get("/api/v1/me").status_code == 401


def test_raw_tokens_are_in_no_table_and_no_log_line(site, caplog):
    res, root = site
    caplog.set_level(logging.DEBUG)
    client = APIClient()
    client.force_login(root)
    secrets = []
    for name in ("ci", "deploy"):
        body = client.post("/api/v1/tokens", {"name": name, "expires_in_days": 30}, format="json").json()
        secrets.append(body["token"])
    issued = client.post("/api/v1/tokens", {"name": "for-other", "username": root.username}, format="json")
    secrets.append(issued.json()["token"])
    for secret in secrets:
        script = APIClient()
        script.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert script.get("/api/v1/me").status_code == 200
        assert script.post(f"/api/v1/resources/{res.pk}/reconcile", {"reason": "used"}, format="json"
                           ).status_code == 202
    bad = APIClient()
    bad.credentials(HTTP_AUTHORIZATION=f"Bearer {secrets[0]}x")
    assert bad.get("/api/v1/me").status_code == 401

    rows = 0
    for model in apps.get_models():
        for row in model._base_manager.all().values():
            rows += 1
            text = repr(row)
            for secret in secrets:
                assert secret not in text and secret[9:] not in text, (model.__name__, row)
    assert rows > 20
    listed = client.get("/api/v1/tokens").content.decode()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in secrets:
        assert secret[9:] not in listed and secret[9:] not in logged
