"""The workers page renders each worker's fields and its running key linked to the resource, says plainly when
no worker answered; the queue page links keys to their resources, words due times ('in 30 s', 'overdue by'),
and an empty queue says what the page shows, the last hour's runs and where the workers are."""

from __future__ import annotations

import re
import time

import pytest
from django.utils import timezone

from reconcilers.models import ReconcileRun
from reconcilers.services import workers
from reconcilers.services.selectors.queue import due_wording
from tests.opsconsole.api import factories as f
from tests.reconcilers.services.test_workers import FakeInspect, stats_reply


@pytest.fixture
def inspect(monkeypatch):
    """`inspect(fake)`: the workers service reads `fake` instead of broadcasting."""
    workers.workers_cache_clear()

    def use(fake: FakeInspect) -> None:
        monkeypatch.setattr(workers, "_default_inspect", fake)

    yield use
    workers.workers_cache_clear()


def row(html: str, name: str) -> str:
    match = re.search(rf'<tr class="worker[^"]*" data-worker="{re.escape(name)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {name}"
    return match.group(1)


def test_the_workers_page_lists_two_workers_with_their_fields_and_a_linked_active_key(as_role, inspect):
    res = f.resource("web")
    other = f.resource("hidden", namespace="secret")
    ReconcileRun.objects.create(key=res.key, kind=res.kind, resource=res, started_at=timezone.now(),
                                duration_seconds=0.1, result="error", worker="host1:101")
    inspect(FakeInspect(
        {"a@host1": stats_reply(100, [101, 102]), "b@host2": stats_reply(200, [201], pool="threads", total=3)},
        {"a@host1": [{"name": "reconcilers.reconcile", "args": [res.key], "kwargs": {}, "time_start": time.time() - 5,
                      "worker_pid": 101}],
         "b@host2": [{"name": "reconcilers.reconcile", "args": [other.key], "kwargs": {}, "time_start": time.time()}]},
    ))
    html = as_role("viewer", ["default"]).get("/workers/").content.decode()
    a, b = row(html, "a@host1"), row(html, "b@host2")
    for text in ("host1", ">100<", "prefork", ">2<", f'href="/resources/{res.pk}/"', res.key, "answering"):
        assert text in a, text
    # processed (every task), failed in the hour, uptime 125 s
    assert 'worker-processed">9 ' in a and "1 failed" in a and "2 min" in a
    assert "threads" in b and ">1<" in b and "a key in a namespace you cannot see" in b and other.key not in html
    assert 'data-worker="a@host1"' in html.split('id="throughput"')[1]  # its run in the throughput table
    assert 'href="/workers/"' in html  # the nav link


def test_when_no_worker_answers_the_page_says_so_and_is_not_an_error(as_role, inspect):
    inspect(FakeInspect(None, None))
    response = as_role("viewer").get("/workers/")
    assert response.status_code == 200
    assert "No worker answered within 0.75 s" in response.content.decode()


def test_the_queue_page_links_keys_to_resources_and_words_due_times(as_role, queue):
    res = f.resource("q1")
    queue.add_after(res.key, 30)
    queue.add_after("cache.example.com/v1alpha1/memcacheds/default/unmirrored", 30)
    html = as_role("admin").get("/queue/").content.decode()
    assert f'<a class="key-link" href="/resources/{res.pk}/"><code>{res.key}</code></a>' in html
    assert "<code>cache.example.com/v1alpha1/memcacheds/default/unmirrored</code>" in html
    # due in 30 s when added; the page may be rendered seconds later on a loaded machine
    assert re.search(r">in (1[5-9]|2[0-9]|30) s</time>", html) and " ago</time>" not in html
    assert (due_wording(0.4), due_wording(-0.9), due_wording(-3.2), due_wording(5.0), due_wording(-125)) == (
        "due now", "due now", "overdue by 3 s", "in 5 s", "overdue by 2 min")


def test_an_empty_queue_says_what_the_page_shows_and_the_last_hours_runs(as_role, queue):
    res = f.resource("r")
    f.run(res)
    f.run(res, result="error")
    html = as_role("viewer").get("/queue/").content.decode()
    assert "The queue is empty" in html and 'href="/workers/"' in html
    assert re.search(r'id="queue-recent-runs">2<.*id="queue-recent-failed">1<', html, re.S)


def test_the_workqueue_depth_over_the_last_hour_is_drawn_for_someone_who_sees_every_namespace(
        as_role, monkeypatch):
    import time as clock

    from reconcilers.engine import dispatch

    queue_ = dispatch.get_queue()
    now = clock.time()
    for minutes_ago, depth in ((50, 3), (20, 12), (2, 7)):
        queue_.record_depth(depth, now - minutes_ago * 60)
    assert [d for _, d in queue_.depth_history()] == [3, 12, 7]
    from reconcilers.services import workers as workers_service

    monkeypatch.setattr(workers_service, "workers_snapshot", lambda **_: {"workers": [], "error": "", "at": now,
                                                                          "timeout": 0.75})
    page = as_role("admin").get("/workers/").content.decode()
    assert 'id="depth-history"' in page and "Workqueue depth" in page
    limited = as_role("viewer", ["team-a"]).get("/workers/").content.decode()
    assert 'id="depth-history"' not in limited  # whole-queue counts are not for a namespace-limited user
