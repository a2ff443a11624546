"""The ``/kubesim/...`` admin endpoints: fault injection, failing a Pod, stats, snapshots and the log of
authorization decisions (under RBAC)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from aiohttp import web

from kubesim import errors
from kubesim.server.http import json_response, read_body

if TYPE_CHECKING:
    from kubesim.simulator import Simulator


def add_admin_routes(app: web.Application, sim: Simulator) -> None:
    """Register the admin routes on ``app``."""

    async def get_faults(request: web.Request) -> web.Response:
        return json_response(sim.options.faults.to_dict())

    async def change_faults(request: web.Request) -> web.Response:
        body = await read_body(request) or {}
        if not isinstance(body, dict):
            raise errors.bad_request("expected a JSON object of fault settings")
        if request.method == "PUT":
            sim.options.faults.clear()
        try:
            sim.options.faults.update(body)
        except ValueError as e:
            raise errors.bad_request(str(e)) from e
        return json_response(sim.options.faults.to_dict())

    async def clear_faults(request: web.Request) -> web.Response:
        sim.options.faults.clear()
        return json_response(sim.options.faults.to_dict())

    async def fail_pod(request: web.Request) -> web.Response:
        body = await read_body(request) or {}
        ns, name = request.match_info["namespace"], request.match_info["name"]
        pod = sim.fail_pod(ns, name, reason=str(body.get("reason", "Error")), message=str(body.get("message", "")),
                           exit_code=int(body.get("exitCode", 1)))
        return json_response(pod)

    async def stats(request: web.Request) -> web.Response:
        return json_response({"resourceVersion": sim.store.rv, "objects": sum(1 for _ in sim.store.all_items()),
                              "watches": sim.active_watches, "historyOldest": sim.store.compacted_rv,
                              "injectedErrors": sim.injected_errors, "delayedRequests": sim.delayed_requests,
                              "watchesCut": sim.watches_cut, "requests": dict(sim.request_counts)})

    async def snapshot(request: web.Request) -> web.Response:
        if sim.persistence is None:
            raise errors.bad_request("kubesim runs without --data-dir")
        sim.persistence.snapshot()
        return json_response({"resourceVersion": sim.store.rv})

    async def access(request: web.Request) -> web.Response:
        wanted_user = request.query.get("user")
        wanted = request.query.get("allowed")
        items = [e for e in sim.access_log if (wanted_user is None or e["user"] == wanted_user)
                 and (wanted is None or e["allowed"] == (wanted.lower() in ("true", "1")))]
        return json_response({"items": items})

    async def clear_access(request: web.Request) -> web.Response:
        sim.access_log.clear()
        return json_response({"items": []})

    app.router.add_get("/kubesim/access", access)
    app.router.add_delete("/kubesim/access", clear_access)
    app.router.add_get("/kubesim/faults", get_faults)
    app.router.add_put("/kubesim/faults", change_faults)
    app.router.add_patch("/kubesim/faults", change_faults)
    app.router.add_delete("/kubesim/faults", clear_faults)
    app.router.add_post("/kubesim/pods/{namespace}/{name}/fail", fail_pod)
    app.router.add_get("/kubesim/stats", stats)
    app.router.add_post("/kubesim/snapshot", snapshot)
