"""The API's error bodies, one shape for every error:

    {"status": 400, "code": "invalid", "message": "…", "fields": {"reason": ["This field is required."]}}

`fields` appears on 400s and names each offending field (query parameters included); 429s carry
`retry_after` (and the Retry-After header). Bad input never becomes a 500: Django's ValidationError,
a selector's InvalidFilter and malformed ids are 400s; an unreachable Kubernetes API or Redis is a 503.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
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
    if isinstance(exc, exceptions.Throttled):
        extra["retry_after"] = int(exc.wait or 1) if exc.wait is not None else 1
        response["Retry-After"] = str(extra["retry_after"])
    response.data = error_body(response.status_code, code, message, **extra)
    return response
