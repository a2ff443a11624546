"""`manage.py whatif KEY -f spec.yaml [--json]`: preview a candidate spec of one object from the shell, with the
kind's real step and every write a server-side dry run; nothing is stored (`reconcilers.services.whatif`).

KEY is the workqueue key (`cache.example.com/v1alpha1/memcacheds/<namespace>/<name>`) or `<Kind> <namespace>/<name>`
as one argument (`"Memcached apps/web"`). `-f -` reads standard input. The file holds the spec, or the whole object.
Each preview is an ActionRecord (`resource.whatif`, auth `command`, like the other commands' actions). The exit
status is 1 when the spec would be refused, the cluster refuses dry run or the preview could not run.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from opsconsole.accounts.action_records import action_record
from reconcilers.engine.whatif import WhatIf
from reconcilers.management.healing_command import HealingCommand, login_name
from reconcilers.models import Resource
from reconcilers.services.whatif import WhatIfError, resource_whatif, spec_from_text


def render(preview: WhatIf) -> list[str]:
    """The preview as lines of text."""
    lines = [f"what if     {preview.key}  (nothing stored)"]
    for c in preview.spec_diff:
        lines.append(f"  spec      {c.path}: {json.dumps(c.before)} -> {json.dumps(c.after)}")
    if preview.refused:
        lines.append("refused     by validation/admission:")
        lines += [f"  {c['field'] or '-'}: {c['message']}" for c in preview.causes]
        return lines
    if preview.dry_run_refused:
        return [*lines, f"dry run     {preview.error}"]
    moved = f" ({', '.join(preview.transitions)})" if preview.transitions else " (no change)"
    lines.append(f"phase       {preview.recorded_phase or '(none)'} -> {preview.phase}{moved}"
                 + (" REFUSED by the state machine" if preview.transition_refused else ""))
    if preview.reason or preview.message:
        lines.append(f"  reason    {preview.reason}: {preview.message}")
    lines.append(f"result      {preview.result}  queue {preview.queue}")
    for child in preview.children:
        where = f"{child.namespace}/{child.name}" if child.namespace else child.name
        lines.append(f"child       {child.kind} {where}: {child.action}")
        lines += [f"  {c.path}: {json.dumps(c.before)} -> {json.dumps(c.after)}" for c in child.changes]
        if child.truncated:
            lines.append(f"  … {child.truncated} more")
    for v in preview.admission:
        lines.append(f"admission   {v.method} {v.path}: {'allowed' if v.allowed else f'refused {v.code} {v.message}'}")
    if preview.error:
        lines.append(f"error       {preview.error}")
    return lines


class Command(BaseCommand):
    help = "Preview a candidate spec of one object (the kind's step, every write a dry run; nothing stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("key", help="the workqueue key, or '<Kind> <namespace>/<name>'")
        parser.add_argument("-f", "--file", required=True, help="the spec or the whole object (YAML); - = stdin")
        parser.add_argument("--json", action="store_true", help="print the preview as JSON")
        parser.add_argument("--as", dest="as_user", default=None, help="who asks (default: your login name)")

    def handle(self, *args: Any, **options: Any) -> None:
        user = options["as_user"] or login_name()
        key = options["key"]

        def record(status: int, target: str, detail: dict[str, Any]) -> None:
            action_record(action="resource.whatif", method="CLI", path=f"manage.py whatif {key}"[:1024],
                          status_code=status, actor=user, auth="command", target=target,
                          detail={"via": "command", **detail})

        try:
            resource = self._resource(key)
        except CommandError as exc:
            record(404, key, {"message": str(exc)})
            raise
        try:
            text = sys.stdin.read() if options["file"] == "-" else open(options["file"], encoding="utf-8").read()
            preview = resource_whatif(resource, spec_from_text(text))
        except OSError as exc:
            record(400, resource.key, {"message": f"file: {exc}"})
            raise CommandError(f"file: {exc}") from exc
        except WhatIfError as exc:
            record(exc.status, resource.key, {"message": str(exc)})
            raise CommandError(f"{getattr(exc, 'field', 'whatif')}: {exc}") from exc
        record(200, resource.key, {"spec_diff": [c.path for c in preview.spec_diff][:50], "phase": preview.phase,
                                   "refused": preview.refused, "dry_run_refused": preview.dry_run_refused})
        if options["json"]:
            self.stdout.write(json.dumps(preview.as_dict(), indent=2, default=str))
        else:
            self.stdout.write("\n".join(render(preview)))
        if preview.refused or preview.dry_run_refused:
            raise CommandError("the spec would be refused" if preview.refused else preview.error)

    def _resource(self, key: str) -> Resource:
        if " " in key.strip():
            kind, target = key.strip().split(None, 1)
            return HealingCommand().resource(kind, target)
        row = Resource.objects.filter(key=key).order_by("deleted", "-created_at", "-id").first()
        if row is None:
            raise CommandError(f"no object with key {key} on record")
        return row
