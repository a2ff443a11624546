"""API errors rendered as metav1.Status objects with the apiserver's reasons, codes and messages."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """An error the API answers with a ``Status`` object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def status(self) -> dict[str, Any]:
        """The ``Status`` body."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(name: str, group: str, kind: str, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name}
    if group:
        details["group"] = group
    details["kind"] = kind
    details.update(extra)
    return details


def qualified(plural: str, group: str) -> str:
    """``plural.group`` as the apiserver names a resource in messages (plain plural for core)."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    """404 NotFound for one object."""
    return ApiError(404, "NotFound", f'{qualified(plural, group)} "{name}" not found', _details(name, group, plural))


def resource_not_found() -> ApiError:
    """404 for a path the server does not serve."""
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(plural: str, group: str, name: str) -> ApiError:
    """409 AlreadyExists."""
    return ApiError(
        409, "AlreadyExists", f'{qualified(plural, group)} "{name}" already exists', _details(name, group, plural)
    )


def conflict(plural: str, group: str, name: str, why: str | None = None) -> ApiError:
    """409 Conflict (stale resourceVersion, failed precondition)."""
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": {why}',
        _details(name, group, plural),
    )


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid with one cause per bad field."""
    parts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
    qkind = f"{kind}.{group}" if group else kind
    return ApiError(
        422, "Invalid", f'{qkind} "{name}" is invalid: {summary}', _details(name, group, kind, causes=causes)
    )


def cause(field: str, reason: str, message: str) -> dict[str, str]:
    """One ``details.causes`` entry."""
    return {"reason": reason, "message": message, "field": field}


def gone(message: str) -> ApiError:
    """410 Gone / Expired."""
    return ApiError(410, "Expired", message, {})


def bad_request(message: str) -> ApiError:
    """400 BadRequest."""
    return ApiError(400, "BadRequest", message, {})


def forbidden(message: str, plural: str = "", group: str = "", name: str = "") -> ApiError:
    """403 Forbidden."""
    return ApiError(403, "Forbidden", message, _details(name, group, plural) if plural else {})


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    """405 MethodNotAllowed."""
    return ApiError(405, "MethodNotAllowed", message, {})


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    """415 UnsupportedMediaType."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: {', '.join(accepted)}",
        {},
    )


def too_many_requests(retry_after: int) -> ApiError:
    """429 TooManyRequests with Retry-After."""
    return ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later.",
        {"retryAfterSeconds": retry_after},
        {"Retry-After": str(retry_after)},
    )


def internal_error(message: str) -> ApiError:
    """500 InternalError."""
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def unauthorized() -> ApiError:
    """401 Unauthorized."""
    return ApiError(401, "Unauthorized", "Unauthorized", None)
