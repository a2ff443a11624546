"""The audit of actions: every request to an action view — allowed, refused (401/403/429) or rejected (400,
404, 409) — appends one ActionRecord with who (user, how authenticated), what (action, target), why (the
reason given) and the outcome. It is written in `finalize_response`, which DRF runs for every answer,
including the ones authentication, permissions and throttling refuse before the view runs."""

from __future__ import annotations

import logging
from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from opsconsole.accounts.action_records import action_record
from opsconsole.accounts.client_address import client_address
from opsconsole.accounts.models import ApiToken

log = logging.getLogger(__name__)


def _reason(request: Request) -> str:
    try:
        data = request.data
    except Exception:  # unparseable body: the record says so through the status
        return ""
    if isinstance(data, dict):
        value = data.get("reason", "")
        return value if isinstance(value, str) else ""
    return ""


class AuditedActionView(APIView):
    """Base of the action views: set `audit_action`; override `audit_target`; put extra facts in
    `self.audit_detail` while handling; `self.audit_cluster` names the record's cluster when the target (not a
    reconcile key) does not."""

    audit_action = "action"

    def audit_target(self, request: Request, **kwargs: Any) -> str:
        """What the action is about (default: the URL's arguments)."""
        return ",".join(f"{k}={v}" for k, v in sorted(kwargs.items()))

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        self.audit_detail: dict[str, Any] = {}
        super().initial(request, *args, **kwargs)

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        response = super().finalize_response(request, response, *args, **kwargs)
        try:
            self._audit(request, response, kwargs)
        except Exception:  # the record must not turn an answer into a 500; it is logged loudly instead
            log.exception("could not record the action %s", self.audit_action)
        return response

    def _audit(self, request: Request, response: Any, kwargs: dict[str, Any]) -> None:
        user = getattr(request, "_user", None)
        auth = getattr(request, "_auth", None)
        authenticated = bool(getattr(user, "is_authenticated", False))
        detail = dict(getattr(self, "audit_detail", {}) or {})
        if isinstance(response, Response) and response.status_code >= 400 and isinstance(response.data, dict):
            detail.setdefault("code", response.data.get("code", ""))
            detail.setdefault("message", str(response.data.get("message", ""))[:1000])
        action_record(
            action=self.audit_action,
            method=request.method or "",
            path=request.path,
            status_code=response.status_code,
            actor=user.get_username() if authenticated else "",
            auth=("token" if isinstance(auth, ApiToken) else "session") if authenticated else "",
            token_prefix=auth.prefix if isinstance(auth, ApiToken) else "",
            target=self.audit_target(request, **kwargs),
            reason=_reason(request),
            detail=detail,
            remote_addr=client_address(request),
            cluster=getattr(self, "audit_cluster", ""),
        )
