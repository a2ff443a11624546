"""Bad input to the console: hostile query parameters on every page (NUL, which PostgreSQL cannot store or
compare, non-finite numbers, huge values, forged cursors) and hostile form posts (a reason with NUL, an
oversized body, junk ids). The answer is a page or a 4xx — never a 5xx — and a refused or rejected action is
still in the action record."""

from __future__ import annotations

import base64
import json
import time

import pytest

from reconcilers.models import ActionRecord, ReconcileRequest
from tests.opsconsole.api import factories as f
from tests.opsconsole.console.conftest import csrf_post

pytestmark = pytest.mark.django_db


def _cursor(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


PAGES = {
    "/": ["_live"],
    "/resources/": ["kind", "namespace", "phase", "selector", "q", "stuck", "lag", "sort", "size", "cursor",
                    "_live"],
    "/audit/": ["kind", "namespace", "name", "actor", "from_phase", "to_phase", "after", "before", "cursor",
                "view", "_live"],
    "/audit/ actions": ["actor", "action", "outcome", "after", "before", "cursor"],
    "/queue/": ["_live"],
    "{detail}": ["request", "_live"],
}
HOSTILE = ["\x00", "a\x00b", "nan", "1e999", "-1", "%", "\u202e\u05e9\u05dc\u05d5\u05dd", "x" * 5000, "head,nope"]
CURSORS = [_cursor(["\x00", 1]), _cursor([1e308, "x"]), _cursor([[1], {"a": 1}]), _cursor("x"), "!!!"]


def test_hostile_query_parameters_never_get_a_5xx_from_a_console_page(as_role):
    res = f.resource("hostile")
    f.transition(res, "Pending")
    client = as_role("admin")
    client.raise_request_exception = False  # a crash is answered 500, as a browser would see it
    seen: dict[int, int] = {}
    crashes = []
    started = time.monotonic()
    for path, params in PAGES.items():
        path, _, view = path.format(detail=f"/resources/{res.pk}/").partition(" ")
        base = {"view": view} if view else {}
        for param in [*params, "unknown"]:
            for value in HOSTILE + (CURSORS if param == "cursor" else []):
                response = client.get(path, {**base, param: value})
                seen[response.status_code] = seen.get(response.status_code, 0) + 1
                if response.status_code >= 500:
                    crashes.append((path, param, value[:20], response.status_code))
    assert not crashes, "\n".join(map(repr, crashes))
    assert seen.get(200, 0) > 0
    print(f"\nBAD-INPUT console-query: {sum(seen.values())} hostile page loads in {time.monotonic() - started:.1f} s, "
          f"answers {dict(sorted(seen.items()))}")


def test_a_nul_in_a_filter_is_said_on_the_page_not_a_crash(as_role):
    f.resource("nul-filter")
    client = as_role("viewer")
    for path, param in (("/resources/", "q"), ("/resources/", "namespace"), ("/audit/", "actor"),
                        ("/resources/", "stuck")):
        response = client.get(path, {param: "a\x00b" if param != "stuck" else "inf"})
        assert response.status_code == 200
        assert 'role="alert"' in response.content.decode(), (path, param)


@pytest.mark.parametrize("reason", ["nul \x00 inside", "\x00"])
def test_a_reason_with_nul_is_refused_as_invalid_and_recorded(as_role, queue, reason):
    res = f.resource("nul-reason")
    client = as_role("operator")
    response = csrf_post(client, f"/resources/{res.pk}/reconcile", {"reason": reason})
    assert response.status_code == 400
    assert not ReconcileRequest.objects.exists() and queue.sent.keys == []
    record = ActionRecord.objects.order_by("-id").first()
    assert (record.action, record.outcome, record.status_code) == ("resource.reconcile", "rejected", 400)
    assert "\x00" not in record.reason
    bulk = csrf_post(client, "/resources/reconcile", {"ids": [res.pk], "reason": reason})
    assert bulk.status_code == 302 and not ReconcileRequest.objects.exists()
    assert ActionRecord.objects.order_by("-id").first().outcome == "rejected"


def test_an_id_too_big_for_any_row_is_a_404_not_a_crash(as_role, queue):
    client = as_role("operator")
    client.raise_request_exception = False
    for pk in (2**63, 2**70, 10**30):
        assert client.get(f"/resources/{pk}/").status_code == 404
        assert csrf_post(client, f"/resources/{pk}/reconcile", {"reason": "r"}).status_code == 404


def test_junk_in_the_bulk_form_is_rejected_not_a_crash(as_role, queue):
    client = as_role("operator")
    for ids in (["x"], ["1e9"], [str(2**70)], [str(2**63)], ["-1"], ["0"], [""]):
        response = csrf_post(client, "/resources/reconcile", {"ids": ids, "reason": "r", "next": "//evil.example"})
        assert response.status_code == 302, ids
        assert response["Location"] == "/resources/"  # never an off-site redirect
    assert not ReconcileRequest.objects.exists()
    for key in ("\x00", "a/b", "x" * 5000):
        assert csrf_post(as_role("admin"), "/queue/retry-now", {"key": key}).status_code == 302


def test_an_oversized_console_post_is_a_400_not_a_crash(as_role, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 32 * 1024
    res = f.resource("big-post")
    client = as_role("operator")
    response = csrf_post(client, f"/resources/{res.pk}/reconcile", {"reason": "r" * (64 * 1024)})
    assert response.status_code == 400
    assert not ReconcileRequest.objects.exists()
