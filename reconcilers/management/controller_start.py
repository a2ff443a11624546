"""What `manage.py runcontroller` sets up before it builds the controller: the folders `--bootstrap` reads, and the
controller's telemetry (tracing, the metrics' label pairs, /metrics and /healthz)."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from opsconsole.telemetry.health import metrics_health_server_start
from opsconsole.telemetry.metrics import reconciler_metrics_init
from opsconsole.telemetry.tracing import tracing_setup


def bootstrap_dirs(crds: Path | None, samples: Path | None, *, generated: bool) -> tuple[Path | None, Path]:
    """The folders `--bootstrap` reads: the given ones, else the checkout's deploy/crds and deploy/samples (no CRD
    folder with `--install-crds`, which applies the generated CRDs). CommandError naming the option when one is not
    a folder, and saying what to pass when a default is missing (opsconsole installed from its wheel has no deploy/)."""
    deploy = Path(settings.BASE_DIR) / "deploy"

    def folder(name: str, given: Path | None) -> Path:
        if given is not None:
            if not given.is_dir():
                raise CommandError(f"--{name} {given}: not a directory")
            return given
        if not (deploy / name).is_dir():
            raise CommandError(
                f"--bootstrap: {deploy / name} does not exist (deploy/ is in a checkout of opsconsole, not in its "
                "wheel): pass --crds DIR --samples DIR, the folders of your CRD and sample manifests (*.yaml), or "
                "--install-crds --samples DIR to apply the CRDs generated from the registered kinds")
        return deploy / name

    return (None if generated else folder("crds", crds)), folder("samples", samples)


def telemetry_start(command: BaseCommand) -> None:
    """Tracing ("opsconsole-controller"; off with OPSCONSOLE_TRACING=off), every label pair at 0, and /metrics
    and /healthz on OPSCONSOLE_CONTROLLER_METRICS_PORT (0: not served; a busy port is a warning, never a stop)."""
    tracing_setup("opsconsole-controller")
    reconciler_metrics_init()
    port = int(getattr(settings, "OPSCONSOLE_CONTROLLER_METRICS_PORT", 0) or 0)
    if port:
        addr = getattr(settings, "OPSCONSOLE_METRICS_ADDR", "127.0.0.1")
        try:
            metrics_health_server_start(port, addr)
            command.stdout.write(f"runcontroller: /metrics and /healthz on {addr}:{port}")
        except OSError as exc:
            command.stderr.write(f"runcontroller: /metrics not served on port {port}: {exc}")
