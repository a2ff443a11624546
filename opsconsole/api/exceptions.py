"""The API's error bodies, one shape for every error:

    {"status": 400, "code": "invalid", "message": "…", "fields": {"reason": ["This field is required."]}}

`fields` appears on 400s and names each offending field (query parameters included), and on a 403 refusing one
field's value (a token's role or expiry above the token that asks) and on a 404 for an unknown cluster
(`{"cluster": ["No such cluster: x"]}`); 429s carry
`retry_after` (and the Retry-After header). Bad input never becomes a 500: Django's ValidationError,
a selector's InvalidFilter and malformed ids are 400s; a body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413; an
unreachable Kubernetes API or Redis is a 503. Paths under /api/ that match no route (and a crash there) answer
the same JSON shape through Django's handler404/handler500 (`api_not_found`, `api_server_error`), not HTML.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from redis.exceptions import RedisError
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from reconcilers.services.selectors.filters import InvalidFilter

log = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    """409: the request conflicts with the current state (e.g. an idempotency key reused for another object)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state."
    default_code = "conflict"


class PayloadTooLarge(exceptions.APIException):
    """413: the request body is over the upload limit (DATA_UPLOAD_MAX_MEMORY_SIZE); it was not read."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The request body is too large."
    default_code = "payload_too_large"


class Unavailable(exceptions.APIException):
    """503: a dependency (Kubernetes API, Redis) did not answer."""

    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "A dependency is unavailable; try again later."
    default_code = "unavailable"


def _message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _message(detail[0])
    if isinstance(detail, dict):
        first = next(iter(detail.items()), None)
        return f"{first[0]}: {_message(first[1])}" if first else "Invalid input."
    return str(detail)


def _code(exc: exceptions.APIException) -> str:
    codes = exc.get_codes()
    if isinstance(codes, str):
        return codes
    return getattr(exc, "default_code", "error")


def error_body(status_code: int, code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The JSON body of an error answer."""
    return {"status": status_code, "code": code, "message": message, **extra}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with our body shape and the conversions listed in the module docstring."""
    if isinstance(exc, InvalidFilter):
        exc = exceptions.ValidationError({exc.field: [exc.message]})
    elif isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLarge(f"The request body is over the limit of {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    elif isinstance(exc, SuspiciousOperation):  # e.g. too many form fields: refused input, not a crash
        exc = exceptions.ParseError(str(exc) or "The request was refused as malformed.")
    elif isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, RedisError):
        log.warning("redis unavailable: %s", exc)
        exc = Unavailable(f"Redis is unavailable: {exc}")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    assert isinstance(exc, exceptions.APIException)
    extra: dict[str, Any] = {}
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail if isinstance(exc.detail, dict) else {"non_field_errors": exc.detail}
        extra["fields"] = detail
        message = _message(detail)
        code = "invalid"
    else:
        message = _message(exc.detail)
        code = _code(exc)
        if isinstance(exc, (exceptions.PermissionDenied, exceptions.NotFound)) and isinstance(exc.detail, dict):
            extra["fields"] = exc.detail  # a refusal about one field (a token's role or expiry), an unknown cluster
    if isinstance(exc, exceptions.Throttled):
        extra["retry_after"] = int(exc.wait or 1) if exc.wait is not None else 1
        response["Retry-After"] = str(extra["retry_after"])
    response.data = error_body(response.status_code, code, message, **extra)
    return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/api/")


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: the JSON error body under /api/, Django's page elsewhere."""
    if _is_api(request):
        return JsonResponse(error_body(404, "not_found", f"No API endpoint at {request.path}."), status=404)
    return defaults.page_not_found(request, exception)  # type: ignore[arg-type]


def api_server_error(request: HttpRequest) -> HttpResponse:
    """handler500: the JSON error body under /api/ (the error itself is logged by Django), the page elsewhere."""
    if _is_api(request):
        return JsonResponse(error_body(500, "error", "Internal server error."), status=500)
    return defaults.server_error(request)
