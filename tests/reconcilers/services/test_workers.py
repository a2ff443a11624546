"""The workers service: a fake Celery inspect's answers become workers (pool, concurrency, active key, totals,
uptime); no answer is an empty reading, not an error; a reading is cached (two calls, one broadcast); run and
failure counts and the per-minute throughput come from ReconcileRun rows of each worker's pool processes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from reconcilers.models import ReconcileRun
from reconcilers.services import workers

KEY = "cache.example.com/v1alpha1/memcacheds/default/web"


def stats_reply(pid: int, children: list[int], *, pool: str = "prefork", total: int = 7) -> dict:
    return {"pid": pid, "uptime": 125, "total": {"reconcilers.reconcile": total, "opsconsole.ping": 2},
            "pool": {"implementation": f"celery.concurrency.{pool}:TaskPool", "max-concurrency": len(children),
                     "processes": children}}


class FakeInspect:
    """Records each broadcast; answers stats() and active() from dicts."""

    def __init__(self, stats: dict, active: dict) -> None:
        self.stats_answer, self.active_answer = stats, active
        self.calls: list[tuple[str, float, list[str] | None]] = []

    def __call__(self, timeout: float, destination: list[str] | None = None) -> FakeInspect:
        self._pending = (timeout, destination)
        return self

    def stats(self) -> dict | None:
        self.calls.append(("stats", *self._pending))
        return self.stats_answer

    def active(self) -> dict | None:
        self.calls.append(("active", *self._pending))
        return self.active_answer


@pytest.fixture(autouse=True)
def _no_cached_reading():
    workers.workers_cache_clear()
    yield
    workers.workers_cache_clear()


def two_workers() -> FakeInspect:
    started = time.time() - 3
    return FakeInspect(
        {"a@host1": stats_reply(100, [101, 102]), "b@host2": stats_reply(200, [201], pool="threads", total=0)},
        {"a@host1": [{"name": "reconcilers.reconcile", "args": [KEY, True], "kwargs": {}, "time_start": started,
                      "worker_pid": 101}], "b@host2": []},
    )


def test_answers_become_workers_with_pool_concurrency_active_key_and_totals():
    fake = two_workers()
    snap = workers.workers_snapshot(inspect=fake, timeout=0.5)
    assert snap["error"] == "" and not snap["cached"]
    a, b = snap["workers"]
    assert (a["name"], a["host"], a["pid"], a["pool"], a["concurrency"]) == ("a@host1", "host1", 100, "prefork", 2)
    assert (a["processed"], a["reconciles"], a["uptime_seconds"], a["processes"]) == (9, 7, 125.0, [101, 102])
    assert a["active"][0]["key"] == KEY and a["active"][0]["since"] <= timezone.now() - timedelta(seconds=2)
    assert (b["pool"], b["concurrency"], b["active"]) == ("threads", 1, [])
    # active() is asked only of the workers that answered stats(), so it returns when they all have
    assert fake.calls == [("stats", 0.5, None), ("active", 0.5, ["a@host1", "b@host2"])]


def test_no_answer_is_an_empty_reading_and_a_broker_error_is_said():
    snap = workers.workers_snapshot(inspect=FakeInspect(None, None), timeout=0.5)
    assert (snap["workers"], snap["error"], snap["timeout"]) == ([], "", 0.5)
    workers.workers_cache_clear()

    def down(timeout, destination=None):
        raise ConnectionError("refused")

    assert "the broker did not answer" in workers.workers_snapshot(inspect=down)["error"]


def test_two_reads_within_the_ttl_make_one_broadcast():
    fake = two_workers()
    workers.workers_snapshot(inspect=fake)
    second = workers.workers_snapshot(inspect=fake)
    assert [c[0] for c in fake.calls] == ["stats", "active"] and second["cached"]
    assert len(second["workers"]) == 2


def test_a_worker_that_stops_answering_is_listed_with_its_last_heartbeat():
    workers.workers_snapshot(inspect=two_workers(), ttl=0.01)
    time.sleep(0.02)
    only_a = FakeInspect({"a@host1": stats_reply(100, [101, 102])}, {"a@host1": []})
    snap = workers.workers_snapshot(inspect=only_a)
    assert [w["name"] for w in snap["workers"]] == ["a@host1"]
    silent = snap["silent"]
    assert [w["name"] for w in silent] == ["b@host2"] and not silent[0]["answering"]
    assert silent[0]["last_heartbeat"] is not None and silent[0]["uptime_seconds"] is None


@pytest.mark.django_db
def test_run_counts_and_throughput_come_from_each_workers_pool_processes():
    now = timezone.now()

    def run(worker: str, result: str = "success", minutes_ago: float = 0.0) -> None:
        ReconcileRun.objects.create(key=KEY, kind="Memcached", started_at=now - timedelta(minutes=minutes_ago),
                                    duration_seconds=0.1, result=result, worker=worker)

    run("host1:101")
    run("host1:102", "error")
    run("host1:102", minutes_ago=10)
    run("host2:201", "error")
    run("host1:101", minutes_ago=90)  # outside the hour
    run("elsewhere:9")
    ws = workers.workers_snapshot(inspect=two_workers())["workers"]
    counts = workers.worker_run_counts(ws)
    assert counts == {"a@host1": {"runs": 3, "failed": 1}, "b@host2": {"runs": 1, "failed": 1}}
    series = {s["worker"]: s for s in workers.throughput(ws)}
    assert (series["a@host1"]["total"], series["a@host1"]["last5"], series["a@host1"]["peak"]) == (3, 2, 2)
    assert len(series["a@host1"]["per_minute"]) == workers.WINDOW_MINUTES
    assert series["elsewhere:9"]["total"] == 1 and series["b@host2"]["total"] == 1
