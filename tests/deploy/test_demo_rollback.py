"""`make run`'s self-healing demo (scripts/demo_rollback.py): on the embedded cluster it waits for the sample to be
Running at its first generation, then makes the bad change a person would (its image to an unpullable tag, under a
field manager of its own); an object past its first generation is left alone; `make run` starts it only on the
embedded cluster and unless OPSCONSOLE_DEMO_ROLLBACK=0."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import yaml
from kubernetes import client, config

from kubesim.testing import running_kubesim
from scripts.demo_rollback import BROKEN_IMAGE, FIELD_MANAGER, break_when_running
from scripts.run import procfile_lines

ROOT = Path(__file__).resolve().parents[2]
MC = ("cache.example.com", "v1alpha1", "default", "memcacheds")


def test_it_breaks_the_sample_once_it_runs_and_leaves_a_changed_one_alone(tmp_path):
    with running_kubesim(mode="thread", controllers=False) as kubesim:
        api = config.new_client_from_config(kubesim.kubeconfig)
        client.ApiextensionsV1Api(api).create_custom_resource_definition(
            yaml.safe_load((ROOT / "deploy/crds/memcached.yaml").read_text()))
        objects = client.CustomObjectsApi(api)
        sample = yaml.safe_load((ROOT / "deploy/samples/rollback-demo.yaml").read_text())
        assert sample["metadata"]["annotations"]["opsconsole.io/auto-rollback"] == "true"

        def created() -> bool:
            try:
                objects.create_namespaced_custom_object(*MC, sample)
                return True
            except client.exceptions.ApiException:
                return False

        deadline = time.monotonic() + 10
        while not created() and time.monotonic() < deadline:  # the CRD is served a moment after it is created
            time.sleep(0.1)
        outcome: list[str] = []
        waiting = threading.Thread(target=lambda: outcome.append(break_when_running(api, timeout=10, interval=0.05)))
        waiting.start()
        time.sleep(0.3)
        assert outcome == []  # not Running yet: nothing changed
        live = objects.get_namespaced_custom_object(*MC, "memcached-rollback")
        objects.replace_namespaced_custom_object_status(*MC, "memcached-rollback",
                                                        {**live, "status": {"phase": "Running"}})
        waiting.join(15)
        assert outcome == ["broken"]
        live = objects.get_namespaced_custom_object(*MC, "memcached-rollback")
        assert live["spec"]["image"] == BROKEN_IMAGE and live["metadata"]["generation"] == 2
        assert any(entry["manager"] == FIELD_MANAGER for entry in live["metadata"]["managedFields"])
        assert break_when_running(api, timeout=2, interval=0.05) == "skipped"


def test_make_run_starts_the_demo_only_on_the_embedded_cluster():
    embedded = procfile_lines({"OPSCONSOLE_KUBESIM": "1", "KUBECONFIG": "/tmp/k"}, Path("/tmp/d"), "login")
    assert any(line.startswith("demo: ") for line in embedded)
    off = procfile_lines({"OPSCONSOLE_KUBESIM": "1", "KUBECONFIG": "/tmp/k", "OPSCONSOLE_DEMO_ROLLBACK": "0"},
                         Path("/tmp/d"), "login")
    real = procfile_lines({"KUBECONFIG": "/tmp/k"}, Path("/tmp/d"), "login")
    assert not any(line.startswith("demo: ") for line in off + real)
