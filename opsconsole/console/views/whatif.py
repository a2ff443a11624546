""""Preview change" on a resource's detail page: the candidate spec as YAML, previewed with the kind's real step and
every write a server-side dry run (`reconcilers.services.whatif`), nothing stored. Authorised as "Reconcile now"
(the operator role, the object's namespace) and audited (`resource.whatif`) whether it ran or was refused; the
answer page shows the spec diff, the phase the run would record, each child's diff, the admission verdicts and any
error, with the form again to try another spec."""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from opsconsole.accounts.roles import OPERATOR
from opsconsole.console.access import Refused, audited_action, resource_for_action
from opsconsole.console.live import page
from opsconsole.console.security import console_action
from reconcilers.engine.whatif import WhatIf
from reconcilers.services.whatif import MAX_TEXT, WhatIfError, resource_whatif, spec_from_text


@console_action
@require_POST
def resource_whatif_preview(request: HttpRequest, pk: int) -> HttpResponse:
    """Preview the YAML of the form (the spec, or the whole object) for resource `pk`."""
    text = request.POST.get("spec_yaml", "")
    obj = resource_for_action(request, pk)

    def do(detail: dict[str, Any]) -> WhatIf:
        if obj is None:
            raise Refused(404, "No such resource, or it is outside your namespaces.")
        if not text.strip():
            raise Refused(400, "spec_yaml: give the candidate spec as YAML.")
        if len(text) > MAX_TEXT or "\x00" in text:
            raise Refused(400, f"spec_yaml: at most {MAX_TEXT} characters, without NUL.")
        try:
            preview = resource_whatif(obj, spec_from_text(text))
        except WhatIfError as exc:
            where = f"{exc.field}: " if hasattr(exc, "field") else ""
            raise Refused(exc.status, f"{where}{exc}") from exc
        detail.update({"spec_diff": [c.path for c in preview.spec_diff][:50], "phase": preview.phase,
                       "refused": preview.refused, "dry_run_refused": preview.dry_run_refused})
        return preview

    result = audited_action(request, action="resource.whatif", role=OPERATOR,
                            target=obj.key if obj else f"resource:{pk}", reason="", do=do,
                            namespace=obj.namespace if obj else None)
    if result.status >= 400 and (obj is None or result.status in (403, 404)):
        back = reverse("console:resource", args=[pk]) if obj else reverse("console:resources")
        return page(request, "console/refused.html", {"message": result.message, "back": back},
                    status=result.status)
    preview = result.result if isinstance(result.result, WhatIf) else None
    return page(request, "console/whatif.html", {"r": obj, "preview": preview, "spec_yaml": text,
                                                 "spec_rows": _rows(preview.spec_diff) if preview else [],
                                                 "child_rows": [(c, _rows(c.changes)) for c in preview.children]
                                                 if preview else [],
                                                 "problem": result.message if result.status >= 400 else ""},
                status=200 if result.status < 400 else result.status)


def _rows(changes: list[Any]) -> list[tuple[str, str, str]]:
    """(path, before, after) with the values as JSON text ('' when absent)."""
    def text(value: Any) -> str:
        return "" if value is None else json.dumps(value, sort_keys=True)
    return [(c.path, text(c.before), text(c.after)) for c in changes]
