"""docker-compose.yml's profile `clusters` (issue 41, docs/operations.md "Many clusters"), as the real Compose CLI
resolves it: a second, simulated cluster `kubesim-2` writing its kubeconfig (context sandbox-2) where every
opsconsole process reads it, second in KUBECONFIG after the default cluster's, and `controller-2`, that cluster's
own controller (`runcontroller --cluster sandbox-2 --context sandbox-2`), as `make run` starts them. Without the
profile neither runs."""

from __future__ import annotations

import json
from pathlib import PurePosixPath
from typing import Any

import pytest

from tests.deploy.test_compose import (
    COMPOSE,
    OPSCONSOLE,
    SECRETS,
    command_of,
    compose_config,
    depends_of,
    env_of,
    health_test,
    mounts_of,
)

PROFILED = ("kubesim-2", "controller-2")


@pytest.fixture(scope="module")
def services() -> dict[str, dict[str, Any]]:
    proc = compose_config(COMPOSE, {**SECRETS, "COMPOSE_PROFILES": "clusters"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["services"]


def _arg(command: list[str], flag: str) -> str:
    return command[command.index(flag) + 1]


def test_the_profile_adds_a_second_cluster_and_its_controller_only_when_asked(services: dict[str, Any]) -> None:
    assert set(PROFILED) <= set(services)
    proc = compose_config(COMPOSE, SECRETS)
    assert proc.returncode == 0, proc.stderr
    assert not set(PROFILED) & set(json.loads(proc.stdout)["services"])
    for name in PROFILED:
        assert services[name]["profiles"] == ["clusters"], name
        assert services[name]["restart"] == "unless-stopped" and health_test(services[name]), name


def test_controller_2_runs_the_second_clusters_controller_through_its_kubeconfig_context(
        services: dict[str, Any]) -> None:
    kubesim, controller = command_of(services["kubesim-2"]), command_of(services["controller-2"])
    assert kubesim[:3] == ["python", "-m", "kubesim"]
    assert controller[:3] == ["python", "manage.py", "runcontroller"]
    assert _arg(controller, "--cluster") == "sandbox-2" == _arg(controller, "--context") == _arg(kubesim, "--context")
    assert {"--bootstrap", "--install-crds"} <= set(controller)  # as make run's controller-2
    # it starts once its cluster answers, after the migration, like the default cluster's controller
    default = depends_of(services["controller"])
    assert depends_of(services["controller-2"]) == {**default, "kubesim-2": "service_healthy"}
    # the API server's address in the kubeconfig is its name on the compose network, not the container's loopback
    assert _arg(kubesim, "--host") == "kubesim-2"


def test_every_process_lists_the_default_cluster_first_then_the_file_kubesim_2_writes(
        services: dict[str, Any]) -> None:
    written = PurePosixPath(_arg(command_of(services["kubesim-2"]), "--kubeconfig"))
    (volume, target, read_only), = [(s, t, ro) for s, t, ro in mounts_of(services["kubesim-2"])
                                    if written.is_relative_to(t)]
    assert not read_only
    for name in (*OPSCONSOLE, "controller-2"):
        listed = env_of(services[name])["KUBECONFIG"].split(":")
        assert listed[0] == "/kube/config", name  # the default cluster's current context stays the processes' own
        mounts = {s: (t, ro) for s, t, ro in mounts_of(services[name])}
        where, ro = mounts[volume]
        assert ro and listed[1:] == [str(where / written.relative_to(target))], name
