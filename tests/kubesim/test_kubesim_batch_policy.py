"""batch/v1 Jobs and CronJobs, policy/v1 PodDisruptionBudgets: served, defaulted, validated, listed and watched
through the official client as the apiserver does; the disruption controller fills PDB status (no Job or CronJob
controller runs)."""

from __future__ import annotations

import json

import pytest
from kubernetes import client, watch

from kubesim.cluster.batch_policy import cron_schedule_error
from kubesim.testing import wait_for
from tests.kubesim.conftest import raw

POD = {"containers": [{"name": "task", "image": "busybox:1.36", "command": ["true"]}], "restartPolicy": "Never"}


def _job(name: str, **spec: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"spec": dict(POD)}, **spec}}


def _cronjob(name: str, schedule: str = "*/5 * * * *", **spec: object) -> dict:
    return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": name},
            "spec": {"schedule": schedule, "jobTemplate": {"spec": {"template": {"spec": dict(POD)}}}, **spec}}


def _pdb(name: str, **spec: object) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}}, **spec}}


def _causes(e: client.ApiException) -> dict[str, str]:
    body = json.loads(e.body)
    assert body["reason"] == "Invalid", body
    return {c["field"]: c["message"] for c in body["details"]["causes"]}


@pytest.fixture(scope="module")
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture(scope="module")
def policy(api_client: client.ApiClient) -> client.PolicyV1Api:
    return client.PolicyV1Api(api_client)


def test_discovery_serves_batch_and_policy_with_status_subresources(api_client):
    groups = {g["name"]: g["preferredVersion"]["version"] for g in raw(api_client, "GET", "/apis")["groups"]}
    assert groups["batch"] == "v1" and groups["policy"] == "v1"
    batch_names = {r["name"]: r for r in raw(api_client, "GET", "/apis/batch/v1")["resources"]}
    assert {"jobs", "jobs/status", "cronjobs", "cronjobs/status"} <= set(batch_names)
    assert batch_names["cronjobs"]["shortNames"] == ["cj"] and batch_names["cronjobs"]["namespaced"] is True
    policy_names = {r["name"]: r for r in raw(api_client, "GET", "/apis/policy/v1")["resources"]}
    assert policy_names["poddisruptionbudgets"]["shortNames"] == ["pdb"]
    assert "poddisruptionbudgets/status" in policy_names


def test_a_cronjob_gets_the_apiservers_defaults_and_generation_one(batch, ns):
    cj = batch.create_namespaced_cron_job(ns, _cronjob("nightly", "17 3 * * *", timeZone="Etc/UTC"))
    assert cj.metadata.generation == 1
    assert (cj.spec.concurrency_policy, cj.spec.suspend) == ("Allow", False)
    assert (cj.spec.successful_jobs_history_limit, cj.spec.failed_jobs_history_limit) == (3, 1)
    pod = cj.spec.job_template.spec.template.spec
    assert (pod.dns_policy, pod.termination_grace_period_seconds) == ("ClusterFirst", 30)
    assert cj.status.active is None and cj.status.last_schedule_time is None


def test_changing_a_cronjob_spec_moves_generation_and_status_writes_do_not(batch, ns):
    batch.create_namespaced_cron_job(ns, _cronjob("gen"))
    suspended = batch.patch_namespaced_cron_job("gen", ns, {"spec": {"suspend": True}})
    assert suspended.spec.suspend is True and suspended.metadata.generation == 2
    status = batch.patch_namespaced_cron_job_status("gen", ns, {"status": {"lastScheduleTime": "2026-01-01T03:17:00Z"}})
    assert status.metadata.generation == 2 and status.status.last_schedule_time is not None
    ignored = batch.patch_namespaced_cron_job("gen", ns, {"status": {"lastScheduleTime": None}})
    assert ignored.status.last_schedule_time is not None  # the main resource ignores status


@pytest.mark.parametrize(("schedule", "why"), [
    ("every day", "expected exactly 5 fields, found 2"),
    ("61 * * * *", "above maximum (59)"),
    ("* * * 13 *", "above maximum (12)"),
    ("*/0 * * * *", "step of range should be a positive number"),
    ("@fortnightly", "unrecognized descriptor"),
    ("TZ=Europe/Paris 0 3 * * *", "use timeZone field instead"),
])
def test_an_unparseable_schedule_is_422_on_spec_schedule(batch, ns, schedule, why):
    with pytest.raises(client.ApiException) as e:
        batch.create_namespaced_cron_job(ns, _cronjob("bad", schedule))
    assert e.value.status == 422
    assert why in _causes(e.value)["spec.schedule"]


def test_schedules_the_cronjob_controller_parses_are_accepted():
    for ok in ("*/5 * * * *", "0 3 * * 1-5", "0 0 1,15 * *", "30 2 * JAN-MAR sun", "0 12 ? * *", "@daily",
               "@every 1h30m"):
        assert cron_schedule_error(ok) is None, ok


def test_cronjob_rules_time_zone_concurrency_name_length_and_job_template(batch, ns):
    body = _cronjob("x" * 53, timeZone="Mars/Olympus_Mons", concurrencyPolicy="Sometimes")
    body["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    with pytest.raises(client.ApiException) as e:
        batch.create_namespaced_cron_job(ns, body)
    causes = _causes(e.value)
    assert "must be no more than 52 characters" in causes["metadata.name"]
    assert "unknown time zone" in causes["spec.timeZone"]
    assert "Sometimes" in causes["spec.concurrencyPolicy"]
    assert '"OnFailure", "Never"' in causes["spec.jobTemplate.spec.template.spec.restartPolicy"]


def test_a_job_gets_defaults_and_a_selector_generated_from_its_uid(batch, ns):
    job = batch.create_namespaced_job(ns, _job("once"))
    uid = job.metadata.uid
    assert (job.spec.parallelism, job.spec.completions, job.spec.backoff_limit) == (1, 1, 6)
    assert job.spec.completion_mode == "NonIndexed" and job.spec.suspend is False
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": uid}
    labels = job.spec.template.metadata.labels
    assert labels["batch.kubernetes.io/controller-uid"] == uid and labels["batch.kubernetes.io/job-name"] == "once"


def test_a_job_template_is_immutable_but_suspend_may_change(batch, ns):
    batch.create_namespaced_job(ns, _job("fixed"))
    with pytest.raises(client.ApiException) as e:
        batch.patch_namespaced_job("fixed", ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "task", "image": "busybox:1.37"}]}}}})
    assert e.value.status == 422 and "field is immutable" in _causes(e.value)["spec.template"]
    assert batch.patch_namespaced_job("fixed", ns, {"spec": {"suspend": True}}).spec.suspend is True


def test_a_job_must_restart_on_failure_or_never(batch, ns):
    body = _job("always")
    del body["spec"]["template"]["spec"]["restartPolicy"]
    with pytest.raises(client.ApiException) as e:
        batch.create_namespaced_job(ns, body)
    assert '"Always"' in _causes(e.value)["spec.template.spec.restartPolicy"]


def test_a_pdb_starts_with_zero_counts_and_its_budget_can_change(policy, ns):
    pdb = policy.create_namespaced_pod_disruption_budget(ns, _pdb("web", minAvailable=1))
    assert pdb.metadata.generation == 1 and pdb.spec.min_available == 1
    assert (pdb.status.disruptions_allowed, pdb.status.expected_pods, pdb.status.current_healthy) == (0, 0, 0)
    changed = policy.patch_namespaced_pod_disruption_budget("web", ns, {"spec": {"minAvailable": "50%"}})
    assert changed.spec.min_available == "50%" and changed.metadata.generation == 2


@pytest.mark.parametrize(("spec", "field", "why"), [
    ({"minAvailable": 1, "maxUnavailable": 1}, "spec", "cannot be both set"),
    ({"maxUnavailable": "150%"}, "spec.maxUnavailable", "must not be greater than 100%"),
    ({"minAvailable": "half"}, "spec.minAvailable", "a valid percent string"),
    ({"minAvailable": -1}, "spec.minAvailable", "greater than or equal to 0"),
    ({"unhealthyPodEvictionPolicy": "Never"}, "spec.unhealthyPodEvictionPolicy", '"AlwaysAllow"'),
])
def test_an_invalid_pdb_is_422_naming_the_field(policy, ns, spec, field, why):
    with pytest.raises(client.ApiException) as e:
        policy.create_namespaced_pod_disruption_budget(ns, _pdb("bad", **spec))
    assert e.value.status == 422 and why in _causes(e.value)[field]


def test_list_and_watch_see_cronjobs_and_pdbs_like_any_kind(batch, policy, ns):
    rv = batch.list_namespaced_cron_job(ns).metadata.resource_version
    batch.create_namespaced_cron_job(ns, _cronjob("w1"))
    batch.patch_namespaced_cron_job("w1", ns, {"spec": {"suspend": True}})
    batch.delete_namespaced_cron_job("w1", ns)
    seen = [(ev["type"], ev["object"].spec.suspend) for ev in
            watch.Watch().stream(batch.list_namespaced_cron_job, ns, resource_version=rv, timeout_seconds=1)]
    assert seen == [("ADDED", False), ("MODIFIED", True), ("DELETED", True)]
    policy.create_namespaced_pod_disruption_budget(ns, _pdb("a", minAvailable=1))
    policy.create_namespaced_pod_disruption_budget(ns, _pdb("b", maxUnavailable=1))
    assert [p.metadata.name for p in policy.list_namespaced_pod_disruption_budget(ns).items] == ["a", "b"]
    everywhere = policy.list_pod_disruption_budget_for_all_namespaces().items
    assert {("a", ns), ("b", ns)} <= {(p.metadata.name, p.metadata.namespace) for p in everywhere}


def test_the_disruption_controller_counts_a_deployments_ready_pods_into_each_budget(apps, policy, ns):
    labels = {"app": "db"}
    apps.create_namespaced_deployment(ns, {"metadata": {"name": "db"}, "spec": {
        "replicas": 3, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "db", "image": "pg:16"}]}}}})
    budgets = {"one-down": {"maxUnavailable": 1}, "all-up": {"minAvailable": "100%"}, "two-up": {"minAvailable": 2}}
    for name, spec in budgets.items():
        policy.create_namespaced_pod_disruption_budget(ns, {"metadata": {"name": name},
                                                            "spec": {"selector": {"matchLabels": labels}, **spec}})

    def statuses() -> dict[str, tuple[int, int, int, int, str]] | None:
        got = {p.metadata.name: p.status for p in policy.list_namespaced_pod_disruption_budget(ns).items}
        if any(s.current_healthy != 3 for s in got.values()):
            return None
        return {n: (s.expected_pods, s.desired_healthy, s.current_healthy, s.disruptions_allowed,
                    s.conditions[0].reason) for n, s in got.items()}

    settled = wait_for(statuses, timeout=20)
    assert settled == {"one-down": (3, 2, 3, 1, "SufficientPods"), "all-up": (3, 3, 3, 0, "InsufficientPods"),
                       "two-up": (3, 2, 3, 1, "SufficientPods")}
    pdb = policy.read_namespaced_pod_disruption_budget("one-down", ns)
    assert pdb.status.observed_generation == pdb.metadata.generation
