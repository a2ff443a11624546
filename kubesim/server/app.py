"""The aiohttp application: routes, error rendering, bearer-token auth and fault injection middlewares."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from aiohttp import web

from kubesim import errors
from kubesim.auth.request_info import forbidden_message, request_attributes
from kubesim.errors import ApiError
from kubesim.server.admin import add_admin_routes
from kubesim.server.authentication import add_authentication_routes
from kubesim.server.authorization import add_authorization_routes
from kubesim.server.discovery import Discovery, version_info
from kubesim.server.http import USER, error_response, json_response
from kubesim.server.resources import ResourceHandler

if TYPE_CHECKING:
    from kubesim.simulator import Simulator

log = logging.getLogger("kubesim")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_PUBLIC = ("/healthz", "/readyz", "/livez", "/version")


def _is_resource_path(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    return (parts[0] == "api" and len(parts) > 2) or (parts[0] == "apis" and len(parts) > 3)


def build_app(sim: Simulator) -> web.Application:
    """The application serving ``sim``."""

    @web.middleware
    async def errors_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as e:
            return error_response(e)
        except web.HTTPException as e:
            if e.status == 404:
                return error_response(errors.resource_not_found())
            if e.status == 405:
                return error_response(errors.method_not_allowed())
            raise
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # noqa: BLE001 - rendered as the apiserver would
            log.exception("internal error serving %s %s", request.method, request.path)
            return error_response(errors.internal_error(f"{type(e).__name__}: {e}"))

    @web.middleware
    async def auth_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Who asks (401 when nobody kubesim knows), then, under RBAC, whether they may (403 Forbidden)."""
        if request.path in _PUBLIC:
            return await handler(request)
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        token = given.strip() if scheme.lower() == "bearer" else None
        user = sim.authenticator.authenticate(token, sim.service_account_uid)
        if user is None:
            return error_response(errors.unauthorized())
        request[USER] = user
        if sim.authorizer is not None:
            attrs = request_attributes(user, request.method, request.path,
                                       str(request.query.get("watch", "")).lower() in ("true", "1"))
            allowed = sim.authorize(attrs)
            if not allowed:
                details = {key: value for key, value in (("name", attrs.name), ("group", attrs.api_group),
                                                         ("kind", attrs.resource)) if value}
                return error_response(ApiError(403, "Forbidden", forbidden_message(attrs), details))
        return await handler(request)

    @web.middleware
    async def faults_mw(request: web.Request, handler: Handler) -> web.StreamResponse:
        faults = sim.options.faults
        resource_path = _is_resource_path(request.path)
        if resource_path:
            attrs = request_attributes(request[USER], request.method, request.path,
                                       str(request.query.get("watch", "")).lower() in ("true", "1"))
            resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
            sim.request_counts[f"{attrs.verb} {resource}"] += 1
        if resource_path and (not faults.methods or request.method in faults.methods):
            if faults.latency > 0 and random.random() < faults.latency_rate:
                sim.delayed_requests += 1
                await asyncio.sleep(faults.latency)
            if faults.error_rate > 0 and random.random() < faults.error_rate:
                sim.injected_errors += 1
                if faults.error_code == 429:
                    return error_response(errors.too_many_requests(faults.retry_after))
                if faults.error_code == 503:
                    return error_response(ApiError(503, "ServiceUnavailable", "the server is currently unable to "
                                                   "handle the request", {}))
                return error_response(errors.internal_error("injected fault"))
        return await handler(request)

    app = web.Application(middlewares=[errors_mw, auth_mw, faults_mw], client_max_size=16 * 1024 * 1024)
    discovery = Discovery(sim)
    resources = ResourceHandler(sim)

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def version(request: web.Request) -> web.Response:
        return json_response(version_info())

    def sync(fn: Callable[[web.Request], web.StreamResponse]) -> Handler:
        async def wrapped(request: web.Request) -> web.StreamResponse:
            return fn(request)

        return wrapped

    async def not_found(request: web.Request) -> web.Response:
        raise errors.resource_not_found()

    app.router.add_get("/healthz", ok)
    app.router.add_get("/readyz", ok)
    app.router.add_get("/livez", ok)
    app.router.add_get("/version", version)
    for slash in ("", "/"):
        app.router.add_get("/api" + slash, sync(discovery.api_versions))
        app.router.add_get("/api/{version}" + slash, sync(discovery.resource_list))
        app.router.add_get("/apis" + slash, sync(discovery.api_groups))
        app.router.add_get("/apis/{group}" + slash, sync(discovery.api_group))
        app.router.add_get("/apis/{group}/{version}" + slash, sync(discovery.resource_list))
    app.router.add_get("/openapi/v3", sync(discovery.openapi_index))
    app.router.add_get("/openapi/v3/{path:.+}", sync(discovery.openapi_gv))
    app.router.add_get("/openapi/v2", sync(discovery.openapi_v2))
    add_admin_routes(app, sim)
    add_authorization_routes(app, sim)
    add_authentication_routes(app, sim)
    app.router.add_route("*", "/api/{tail:.+}", resources.handle)
    app.router.add_route("*", "/apis/{tail:.+}", resources.handle)
    app.router.add_route("*", "/{tail:.*}", not_found)
    return app
