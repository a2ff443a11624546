"""`make run`'s two sandbox clusters: a second kubesim writing its own kubeconfig context, its own controller for
`sandbox-2` through that context, the default cluster's kubeconfig first in KUBECONFIG (whose current context is
the processes' own), and the demo on the default cluster alone."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest
from kubernetes.config import ConfigException

from reconcilers.engine import kube


def test_the_sandbox_starts_a_second_cluster_with_its_own_controller_and_context(tmp_path):
    from scripts.run import SANDBOX_2, SANDBOX_SAMPLES, procfile_lines, sandbox_samples

    first, second = tmp_path / "kubeconfig", tmp_path / f"kubeconfig-{SANDBOX_2}"
    env = {"OPSCONSOLE_KUBESIM": "1", "KUBECONFIG": os.pathsep.join([str(first), str(second)])}
    lines = dict(line.split(": ", 1) for line in procfile_lines(env, tmp_path, "login"))
    assert f"--kubeconfig {shlex.quote(str(first))} " in lines["kubesim"]
    assert f"--context {SANDBOX_2}" in lines["kubesim-2"] and str(second) in lines["kubesim-2"]
    assert "--cluster" not in lines["controller"]
    assert f"--cluster {SANDBOX_2} --context {SANDBOX_2}" in lines["controller-2"]
    assert lines["webhooks-2"].startswith(f"KUBECONFIG={shlex.quote(str(second))} ")  # installed into sandbox-2
    assert f"--cluster {SANDBOX_2} " in lines["webhooks-2"] and "--cluster" not in lines["webhooks"]  # its notes
    assert "--webhook-client-cert" in lines["kubesim-2"]
    assert lines["demo"].startswith(f"KUBECONFIG={shlex.quote(str(first))} ")
    assert sorted(p.name for p in sandbox_samples(tmp_path).iterdir()) == sorted(SANDBOX_SAMPLES)
    real = dict(line.split(": ", 1) for line in procfile_lines({"KUBECONFIG": "/k"}, tmp_path, "login"))
    assert not {"kubesim-2", "controller-2", "webhooks-2"} & set(real)  # a real cluster: one controller, as before


def write(path: Path, context: str, server: str) -> None:
    path.write_text("apiVersion: v1\nkind: Config\n"
                    f"clusters: [{{name: {context}, cluster: {{server: '{server}'}}}}]\n"
                    f"users: [{{name: {context}, user: {{}}}}]\n"
                    f"contexts: [{{name: {context}, context: {{cluster: {context}, user: {context}}}}}]\n"
                    f"current-context: {context}\n")


def test_a_kubeconfig_list_is_the_first_files_current_context_and_waits_for_that_file(tmp_path):
    first, second = tmp_path / "a.yaml", tmp_path / "b.yaml"
    write(second, "sandbox-2", "http://127.0.0.1:2")
    listed = os.pathsep.join([str(first), str(second)])
    with pytest.raises(ConfigException, match="does not exist"):  # never the second cluster meanwhile
        kube.build_api_client(listed)
    write(first, "kubesim", "http://127.0.0.1:1")
    assert kube.build_api_client(listed).configuration.host == "http://127.0.0.1:1"
    assert kube.build_api_client(listed, "sandbox-2").configuration.host == "http://127.0.0.1:2"
