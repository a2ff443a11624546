"""`WorkQueue`: the work queue's rooms in one class, with every room's scripts and the controller's pump.

The pump (`release_due`, `reap_expired` and `top_up` in one round trip) is here because it joins three rooms: the
delayed side, the leases and the entrance.
"""

from __future__ import annotations

from typing import ClassVar

from reconcilers.engine.workqueue import cache, claims, core, delayed, enqueue, inspection, leases, lingering
from reconcilers.engine.workqueue.cache import ObjectCache
from reconcilers.engine.workqueue.delayed import Delayed
from reconcilers.engine.workqueue.inspection import Inspection
from reconcilers.engine.workqueue.leases import Leases
from reconcilers.engine.workqueue.lingering import Lingering
from reconcilers.engine.workqueue.lua import text

_ROOMS = (core, enqueue, delayed, claims, lingering, leases, cache, inspection)
SCRIPTS: dict[str, str] = {op: src for room in _ROOMS for op, src in room.SCRIPTS.items()}
# the pump's three steps (release_due, reap_expired, top_up) in one round trip, in that order
SCRIPTS["pump"] = "".join(f"local function {op}()\n{SCRIPTS[op]}end\n"
                          for op in ("release_due", "reap_expired", "top_up")) + """
local out = {}
for _, part in ipairs({release_due(), reap_expired(), top_up()}) do
  for _, key in ipairs(part) do out[#out + 1] = key end
end
return out
"""


class WorkQueue(ObjectCache, Lingering, Leases, Delayed, Inspection):
    """One named workqueue in Redis. Thread-safe and process-safe: all state lives in Redis."""

    SCRIPTS: ClassVar[dict[str, str]] = SCRIPTS

    def pump(self) -> list[str]:
        """`release_due`, `reap_expired` and `top_up` (the controller's pump step) in one round trip. Returns the
        keys to dispatch."""
        return list(dict.fromkeys(text(k) for k in self._run("pump", str(self.batch))))
