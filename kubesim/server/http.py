"""HTTP helpers: JSON responses, Status responses, content negotiation and query parameters."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml
from aiohttp import web

from kubesim import errors, protobuf
from kubesim.auth.identity import ADMIN, UserInfo
from kubesim.errors import ApiError
from kubesim.meta import dumps_bytes, load_yaml, loads

#: who made the request (set by the authentication middleware)
USER = web.RequestKey("user", UserInfo)


def request_user(request: web.Request) -> UserInfo:
    """The authenticated user of `request` (the admin where no middleware ran, as in handler unit tests)."""
    return request.get(USER, ADMIN)


def json_response(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """A compact JSON response."""
    return web.Response(body=dumps_bytes(body), status=status, content_type="application/json",
                        headers=headers)


def error_response(err: ApiError) -> web.Response:
    """The Status response for an error."""
    return json_response(err.status(), err.code, err.headers or None)


@dataclass
class Accept:
    """What representation the client asked for."""

    table: bool = False
    table_version: str = "v1"
    partial: str | None = None  # "PartialObjectMetadata" / "PartialObjectMetadataList"


def parse_accept(header: str | None) -> Accept:
    """Table or PartialObjectMetadata when the Accept header asks for it (first acceptable wins)."""
    if not header:
        return Accept()
    for part in header.split(","):
        items = [p.strip() for p in part.split(";")]
        params = dict(p.split("=", 1) for p in items[1:] if "=" in p)
        if params.get("g") != "meta.k8s.io" or items[0] not in ("application/json", "*/*"):
            if items[0] in ("application/json", "*/*", "application/yaml") and "as" not in params:
                return Accept()
            continue
        if params.get("as") == "Table" and params.get("v") in ("v1", "v1beta1"):
            return Accept(table=True, table_version=params["v"])
        if params.get("as") in ("PartialObjectMetadata", "PartialObjectMetadataList") and \
                params.get("v") in ("v1", "v1beta1"):
            return Accept(partial=params["as"], table_version=params["v"])
    return Accept()


def flag(query: Any, name: str) -> bool:
    """A boolean query parameter."""
    return str(query.get(name, "")).lower() in ("true", "1")


def int_param(query: Any, name: str, default: int = 0) -> int:
    """An integer query parameter (400 when malformed)."""
    raw = query.get(name)
    if raw in (None, ""):
        return default
    try:
        return int(raw)
    except ValueError as e:
        raise errors.bad_request(f"invalid value for {name}: {raw!r}") from e


async def read_body(request: web.Request) -> Any:
    """The decoded request body (JSON, or YAML when sent as YAML); None when empty."""
    raw = await request.read()
    if not raw.strip():
        return None
    ctype = request.content_type
    if ctype == "application/vnd.kubernetes.protobuf":
        try:
            return protobuf.decode(raw)
        except protobuf.ProtobufUnsupported as e:
            raise errors.unsupported_media_type(ctype, ["application/json", "application/yaml"]) from e
    if "protobuf" in ctype or "cbor" in ctype:
        raise errors.unsupported_media_type(ctype, ["application/json", "application/yaml"])
    try:
        if "yaml" in ctype:
            return load_yaml(raw.decode())
        return loads(raw)
    except (ValueError, yaml.YAMLError) as e:
        raise errors.bad_request(f"error decoding request body: {e}") from e


def warning_headers(warnings: list[str]) -> dict[str, str] | None:
    """``Warning: 299 - "..."`` headers (joined; aiohttp sends one header)."""
    if not warnings:
        return None
    return {"Warning": ", ".join('299 - "' + w.replace('"', '\\"') + '"' for w in warnings)}
