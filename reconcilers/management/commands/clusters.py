"""`manage.py clusters`: the registered clusters, from the shell.

    manage.py clusters list [--json]            name, server, identity, labels, health state, live resources
    manage.py clusters label NAME k=v [k-] ...  set (k=v) and remove (k-) labels
    manage.py clusters remove NAME              mark removed: history stays, its controller refuses to start and
                                                the workers fail its keys
    manage.py clusters restore NAME             clear the removal

Every change, refused ones too, is appended to the action record (actions `cluster.label`, `cluster.remove`,
`cluster.restore`; target `cluster:NAME`; the record filed under that cluster) with the operating-system user
running the command as actor (`cli:<user>`, auth `command`), as `manage.py grant` and `token` do. The rules are
`reconcilers.services.cluster_admin`'s.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.management.commands.token import _actor
from reconcilers.core.clusters import DEFAULT_CLUSTER, cluster_name_check
from reconcilers.models import Cluster
from reconcilers.services.cluster_admin import (
    ClusterAdminError,
    cluster_label,
    cluster_remove,
    cluster_restore,
    cluster_rows,
)


class Command(BaseCommand):
    help = "List the registered clusters, label them, remove one (its history stays) or restore it."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        listing = sub.add_parser("list")
        listing.add_argument("--json", action="store_true", help="one JSON object per cluster, a list")
        label = sub.add_parser("label")
        label.add_argument("name", help="the cluster")
        label.add_argument("changes", nargs="+", help="key=value to set, key- to remove")
        for name in ("remove", "restore"):
            sub.add_parser(name).add_argument("name", help="the cluster")

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["command"]
        if command == "list":
            self._list(options["json"])
            return
        name = options["name"]
        detail: dict[str, Any] = {"changes": list(options["changes"])} if command == "label" else {}
        try:
            cluster_name_check(name)
        except ValueError as exc:
            self._record(command, 400, name, {**detail, "message": str(exc)})
            raise CommandError(str(exc)) from exc
        try:
            if command == "label":
                before, after = cluster_label(name, list(options["changes"]))
                detail.update(before=before, after=after)
                said = f"{name}: labels {_labels(after) or '(none)'}"
            elif command == "remove":
                when = cluster_remove(name)
                detail["removed_at"] = when.isoformat()
                said = (f"{name} removed at {when.isoformat()}: its history stays; stop its controller (it refuses "
                        "to start from now on); workers fail its keys")
            else:
                when = cluster_restore(name)
                detail["was_removed_at"] = when.isoformat()
                said = f"{name} restored (removed since {when.isoformat()}): its controller may start again"
        except ClusterAdminError as exc:
            self._record(command, exc.status, name, {**detail, "message": str(exc)})
            raise CommandError(str(exc)) from exc
        self._record(command, 200, name, detail)
        self.stdout.write(said)

    def _list(self, as_json: bool) -> None:
        rows = cluster_rows()
        if as_json:
            self.stdout.write(json.dumps([{
                "name": r.name, "server": r.server, "identity": r.identity, "labels": r.labels, "state": r.state,
                "since": r.since.isoformat() if r.since else None, "resources": r.resources} for r in rows],
                indent=2))
            return
        header = ("NAME", "SERVER", "IDENTITY", "LABELS", "STATE", "RESOURCES")
        lines = [header] + [(r.name, r.server or "-", r.identity or "-", _labels(r.labels) or "-",
                             r.state + (f" since {r.since.isoformat(timespec='seconds')}" if r.since else ""),
                             str(r.resources)) for r in rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        for line in lines:
            self.stdout.write("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())

    @staticmethod
    def _record(command: str, status: int, name: str, detail: dict[str, Any]) -> None:
        # filed under the cluster it changed; a name that is none, or no cluster's, is the installation's
        cluster = name if status != 404 and Cluster.objects.filter(name=name).exists() else DEFAULT_CLUSTER
        action_record(action=f"cluster.{command}", method="CLI", path=f"manage.py clusters {command} {name}"[:1024],
                      status_code=status, actor=_actor(), auth="command", target=f"cluster:{name}"[:1024],
                      detail=detail, cluster=cluster)


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
