"""Every console page through the Django test client: what it shows, its filters and deep links, keyset
pagination, live fragments, escaping of what a CR carries, the CSP, empty and error states, namespace limits."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from opsconsole.console.security import CSP
from reconcilers.models import KubeEvent, Span
from tests.opsconsole.api import factories as f

pytestmark = pytest.mark.django_db
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def _chain(res, phases, start=None):
    start = start or timezone.now() - timedelta(minutes=30)
    for i, p in enumerate(phases):
        f.transition(res, p, at=start + timedelta(minutes=i))


def test_the_header_names_the_user_role_and_namespaces(as_role):
    client = as_role("viewer", ["team-a", "team-b"])
    html = client.get("/").content.decode()
    assert client.user.username in html
    assert 'who-role">viewer' in html
    assert "team-a, team-b" in html


def test_every_page_sends_a_strict_csp(as_role):
    client = as_role("admin")
    res = f.resource("csp")
    for path in ("/", "/resources/", f"/resources/{res.pk}/", "/audit/", "/queue/", f"/traces/{'a' * 32}/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response["Content-Security-Policy"] == CSP
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        assert b"<script>" not in response.content  # only external scripts
        assert b" style=" not in response.content


def test_the_overview_draws_each_kind_with_counts_edges_and_dwell_medians(as_role):
    a = f.resource("a", phase="")
    _chain(a, ["Pending", "Running"])
    b = f.resource("b", phase="")
    _chain(b, ["Pending"])
    html = as_role("viewer").get("/").content.decode()
    assert 'aria-label="Memcached state machine"' in html
    assert 'href="/resources/?kind=Memcached&amp;phase=Running"' in html
    assert "<title>Running (ready): 1 resource," in html or "<title>Running (ready): 1 resource<" in html
    assert "<title>Pending (progressing): 1 resource" in html and "1 resources" not in html
    assert "1 now</text>" in html
    assert '<td>Pending → Running</td><td>1/1</td>' in html  # only an edge something took has a label (legend)
    assert "<title>Pending → Running: 1 in the last hour, 1 in the last day</title>" in html
    assert "median 1 min before leaving" in html  # Pending was left after one minute
    assert "Recent transitions" in html and f"/resources/{a.pk}/" in html
    assert "Reconciles per second" in html and "Reconcile time" in html
    assert "celery@test" in html


def test_the_overview_says_so_when_nothing_is_registered(as_role, settings):
    from reconcilers.engine import registry

    settings.OPSCONSOLE_RECONCILERS = []
    settings.OPSCONSOLE_BUILTIN_KINDS = False
    registry.reset()
    try:
        html = as_role("viewer").get("/").content.decode()
    finally:
        registry.reset()
    assert "No reconcilers are registered" in html
    assert "No transitions recorded yet" in html


def test_live_fragments_come_back_as_json_with_the_current_state(as_role):
    client = as_role("viewer")
    res = f.resource("live", phase="")
    response = client.get("/?_live=recent,machines")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert set(response.json()["fragments"]) == {"recent", "machines"}
    assert "No transitions recorded yet" in response.json()["fragments"]["recent"]
    f.transition(res, "Pending")
    assert "live" in client.get("/?_live=recent").json()["fragments"]["recent"]
    head = client.get(f"/resources/{res.pk}/?_live=head").json()["fragments"]["head"]
    assert "badge-wait phase-progressing\">Pending<span class=\"sr-only\"> (progressing)</span>" in head


def test_the_resources_table_filters_by_phase_namespace_label_search_and_lag(as_role):
    f.resource("web-1", "team-a", phase="Running", labels={"tier": "web"})
    f.resource("web-2", "team-b", phase="Failed", labels={"tier": "web"})
    f.resource("db-1", "team-a", phase="Running", labels={"tier": "db"}, observed_generation=None)
    client = as_role("viewer")

    def names(query: str) -> set[str]:
        html = client.get("/resources/?" + query).content.decode()
        return {n for n in ("web-1", "web-2", "db-1") if f">{n}</a>" in html}

    assert names("") == {"web-1", "web-2", "db-1"}
    assert names("phase=Running") == {"web-1", "db-1"}
    assert names("namespace=team-b") == {"web-2"}
    assert names("selector=tier%3Dweb") == {"web-1", "web-2"}
    assert names("q=db") == {"db-1"}
    assert names("lag=1") == {"db-1"}
    assert names("kind=Memcached&phase=Failed") == {"web-2"}
    bad = client.get("/resources/?selector=%3D%3D%3D").content.decode()
    assert 'role="alert"' in bad and "selector" in bad


def test_the_resources_table_pages_by_cursor_in_the_chosen_order(as_role):
    for i in range(25):
        f.resource(f"r-{i:02d}")
    client = as_role("viewer")
    seen: list[str] = []
    url = "/resources/?sort=-name&size=10"
    while url:
        response = client.get(url)
        seen += [row["r"].name for row in response.context["rows"]]
        nxt = response.context["next_url"]
        url = "/resources/" + nxt if nxt else ""
    assert sorted(seen, reverse=True) == seen and len(seen) == 25


def test_the_resources_table_shows_printer_columns_of_a_kind(as_role, monkeypatch):
    from reconcilers.services.selectors import kinds

    monkeypatch.setattr(kinds, "kind_printer_columns", lambda *a, **k: [
        {"name": "Ready", "type": "string", "jsonPath": ".status.readyReplicas", "priority": 0, "description": ""},
        {"name": "Ok", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
         "priority": 0, "description": ""},
        {"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1, "description": ""},
    ])
    f.resource("cols", status={"readyReplicas": 7, "conditions": [{"type": "Ready", "status": "True"}]})
    html = as_role("viewer").get("/resources/?kind=Memcached").content.decode()
    assert ">Ready</th>" in html and ">Ok</th>" in html and ">Size</th>" not in html  # priority 1 hidden
    assert "<td>7</td>" in html and "<td>True</td>" in html


def test_a_viewer_sees_no_action_controls(as_role):
    res = f.resource("ro")
    client = as_role("viewer")
    for path in ("/resources/", f"/resources/{res.pk}/", "/queue/"):
        html = client.get(path).content.decode()
        assert 'id="reconcile-now"' not in html and "Reconcile selected" not in html
        assert 'name="ids"' not in html and "Retry now" not in html


def test_an_operator_sees_reconcile_controls(as_role):
    res = f.resource("rw")
    client = as_role("operator")
    assert "Reconcile selected" in client.get("/resources/").content.decode()
    assert 'id="reconcile-now"' in client.get(f"/resources/{res.pk}/").content.decode()


def test_what_a_cr_carries_is_rendered_as_text(as_role):
    res = f.resource("x", reason="Bad", message=EVIL, conditions=[{"type": "Ready", "status": "False",
                                                                  "reason": "X", "message": EVIL}],
                     spec={"note": EVIL}, status={"message": EVIL}, labels={"a": "b"})
    f.transition(res, "Failed")
    client = as_role("admin")
    for path in (f"/resources/{res.pk}/", "/resources/", "/", "/audit/"):
        html = client.get(path).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html, path
    detail = client.get(f"/resources/{res.pk}/").content.decode()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in detail


def test_the_detail_page_shows_the_machine_path_timeline_runs_and_yaml(as_role):
    res = f.resource("d", phase="", spec={"size": 3})
    _chain(res, ["Pending", "Running", "Degraded"])
    run = f.run(res, result="error", duration=0.25)
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    assert 'class="state st-warn cls-warning current visited" data-state="Degraded"' in html
    assert html.count('class="edge taken') == 2
    assert ">#2 " in html and ">#3 " in html  # the steps' order numbers on the edges they took
    assert "#3" in html and "#1" in html
    assert f'data-run="{run.pk}"' in html and "250 ms" in html and "Boom" in html
    assert f"/traces/{'ab' * 16}/" in html
    assert "size: 3" in html
    assert "intact" in html
    assert "Kubernetes API did not answer" in html  # no cluster in this test: said, not a 500 (live children)


def test_the_detail_page_shows_archived_events_about_the_resource_and_its_children(as_role):
    res = f.resource("web")
    now = timezone.now()
    for count in (1, 3):  # one Event seen twice: one line with its latest count
        KubeEvent.objects.create(resource=res, event_uid="ev-pod", count=count, name="web-abc-1.1", type="Warning",
                                 reason="Failed", message='Failed to pull image "memcached:broken"',
                                 involved_kind="Pod", involved_name="web-abc-1", source="kubelet",
                                 first_timestamp=now - timedelta(minutes=5),
                                 last_timestamp=now - timedelta(minutes=3 - count))
    KubeEvent.objects.create(resource=res, event_uid="ev-own", name="web.2", type="Normal", reason="Created",
                             message="Created Deployment web", involved_kind="Memcached", involved_name="web",
                             involved_uid=res.uid, last_timestamp=now - timedelta(hours=2))
    html = as_role("viewer").get(f"/resources/{res.pk}/").content.decode()
    section = html[html.index('id="ev-h"'):]
    assert section.count("<tr") == 3  # the header and one row per Event
    assert 'class="msg-warning"' in section and "Pod web-abc-1" in section and "this Memcached" in section
    assert "Failed to pull image &quot;memcached:broken&quot;" in section and "<td>3</td>" in section
    assert section.index("Failed") < section.index("Created")  # the most recently seen first


def test_an_invisible_resource_is_a_404(as_role):
    res = f.resource("hidden", "team-b")
    assert as_role("viewer", ["team-a"]).get(f"/resources/{res.pk}/").status_code == 404
    assert as_role("viewer", ["team-b"]).get(f"/resources/{res.pk}/").status_code == 200


def test_namespace_limits_apply_to_the_table_overview_and_audit(as_role):
    a = f.resource("in-a", "team-a")
    b = f.resource("in-b", "team-b")
    f.transition(a, "Running")
    f.transition(b, "Running")
    client = as_role("viewer", ["team-a"])
    for path in ("/resources/", "/", "/audit/"):
        html = client.get(path).content.decode()
        assert "in-a" in html and "in-b" not in html, path


def test_the_trace_page_draws_the_waterfall_and_links_out_when_configured(as_role, settings):
    tid = "0123456789abcdef" * 2
    t0 = timezone.now()
    Span.objects.create(trace_id=tid, span_id="1" * 16, name="reconcile Memcached", service="worker", kind="internal",
                        start_time=t0, end_time=t0 + timedelta(milliseconds=100), duration_ms=100,
                        status_code="ok", attributes={"key": "k"})
    Span.objects.create(trace_id=tid, span_id="2" * 16, parent_span_id="1" * 16, name="PATCH <status>",
                        service="worker", kind="client", start_time=t0 + timedelta(milliseconds=50),
                        end_time=t0 + timedelta(milliseconds=100), duration_ms=50, status_code="error",
                        status_message="409", attributes={"http.status_code": 409})
    client = as_role("viewer")
    html = client.get(f"/traces/{tid}/").content.decode()
    assert "2 spans over 100.0 ms" in html
    assert html.index("reconcile Memcached") < html.index("PATCH &lt;status&gt;")
    assert 'class="indent-1"' in html and 'x="500.0"' in html and 'width="500.0"' in html
    assert "span-error" in html and "http.status_code" in html
    assert "Open in the tracing UI" not in html
    settings.OPSCONSOLE_TRACE_UI_URL = "https://jaeger.example/trace/{trace_id}"
    settings.OTEL_EXPORTER_OTLP_ENDPOINT = "http://jaeger:4318"
    assert f'href="https://jaeger.example/trace/{tid}"' in client.get(f"/traces/{tid}/").content.decode()
    assert "No spans are stored" in client.get(f"/traces/{'f' * 32}/").content.decode()
    assert client.get("/traces/not-a-trace/").status_code == 404


def test_the_audit_log_filters_transitions_and_links_the_exports(as_role):
    a = f.resource("aud-a")
    f.transition(a, "Pending")
    f.transition(a, "Running", actor="user:alice")
    client = as_role("viewer")
    html = client.get("/audit/?actor=user%3Aalice").content.decode()
    assert html.count('class="audit-row"') == 1
    assert "/api/v1/transitions.csv?actor=user%3Aalice" in html
    assert "/api/v1/transitions.jsonl?actor=user%3Aalice" in html
    assert client.get("/api/v1/transitions.csv?actor=user%3Aalice").status_code == 200
    assert client.get("/audit/?to_phase=Pending").content.decode().count('class="audit-row"') == 1
    assert "Nothing recorded matches" in client.get("/audit/?kind=Nope").content.decode()
    assert 'role="alert"' in client.get("/audit/?after=yesterday").content.decode()


def test_the_audit_log_shows_actions_to_admins_only(as_role):
    from opsconsole.accounts.action_records import action_record

    action_record(action="resource.reconcile", method="POST", path="/x", status_code=403, actor="mallory",
                  target="k", reason="why")
    assert "visible to admins only" in as_role("operator").get("/audit/?view=actions").content.decode()
    html = as_role("admin").get("/audit/?view=actions&outcome=refused").content.decode()
    assert "mallory" in html and "badge-bad\">refused" in html


def test_the_chain_status_is_verified_on_request(as_role):
    from tests.opsconsole.console.conftest import csrf_post

    a = f.resource("chain")
    f.transition(a, "Pending")
    client = as_role("admin")
    response = csrf_post(client, "/audit/verify", {})
    assert response.status_code == 302
    html = client.get("/audit/").content.decode()
    assert 'id="chain-status">intact' in html and "1 chain, 1 transition," in html


def test_the_queue_page_lists_backing_off_keys_with_admin_controls(as_role, queue):
    key = "cache.example.com/v1alpha1/memcacheds/default/q1"
    queue.add_rate_limited(key)
    admin_html = as_role("admin").get("/queue/").content.decode()
    assert key in admin_html and "Retry now" in admin_html and "Reset backoff" in admin_html
    assert "Retry now" not in as_role("operator").get("/queue/").content.decode()


def test_the_queue_page_says_when_redis_does_not_answer(as_role, monkeypatch):
    from reconcilers.services.selectors import queue as queue_selector

    def down(**_):
        raise ConnectionError("refused")

    monkeypatch.setattr(queue_selector, "queue_snapshot", down)
    client = as_role("viewer")
    assert "Redis did not answer" in client.get("/queue/").content.decode()
    assert "Redis did not answer" in client.get("/").content.decode()


def test_anonymous_visitors_are_sent_to_the_login_page(client):
    for path in ("/", "/resources/", "/audit/", "/queue/", f"/traces/{'a' * 32}/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/login/"), path
