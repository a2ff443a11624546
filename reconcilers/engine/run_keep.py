"""What a run keeps for later besides its record (`RunKeeper`, around the step): the inputs the step read, packed only
when the run is kept (`sampling.why_keep`: an error, a slow run, a manual request; or a sampled trace), and, when
someone turned the object, its kind or everything verbose (`verbosity`), the run's log lines at that level. Both go
to one `RunCapture` row beside the run (`capture_store`); a failure to keep them is logged, never the run's.

While the step runs, the keeper is the `requestwatch` of the run: it hands the capture each answer (a reference, no
copy) and, with `client` verbosity, logs each request. A run that is neither kept nor verbose costs a list append
per request and nothing at the end.
"""

from __future__ import annotations

import logging
import time
from contextvars import Token
from typing import Any

from reconcilers.core.reconciler import Reconciler
from reconcilers.engine import capture, capture_store, kube, requestwatch, verbosity, versions

client_log = logging.getLogger(verbosity.CLIENT_LOGGER)
log = logging.getLogger(__name__)


class RunKeeper:
    """The capture and the verbose log of one run (a context manager around the step)."""

    def __init__(self, reconciler: Reconciler, key: str, obj: dict[str, Any], recorded: str | None,
                 queue: Any = None) -> None:
        self.reconciler, self.key, self.obj, self.recorded = reconciler, key, obj, recorded
        self.capture = capture.InputCapture()
        store = verbosity.Store.of(queue) if queue is not None else None
        setting = verbosity.levels_for(verbosity.CACHE.get(store), key, reconciler.resource.kind, obj)
        self.log = verbosity.RunLog(setting, reconciler.name) if setting is not None else None
        self._token: Token | None = None

    # -- the requestwatch of the run ------------------------------------------------------------------

    def query(self, method: str, path: str, query: dict[str, Any] | None) -> dict[str, Any] | None:
        return query

    def answered(self, method: str, path: str, body: Any, answer: Any, error: Exception | None) -> None:
        self.capture.answered(method, path, body, answer, error)
        if self.log is not None and self.log.client_level:
            code = getattr(error, "status", "error") if error is not None else "ok"
            client_log.log(self.log.client_level, "%s %s -> %s", method, path, code)

    def __enter__(self) -> RunKeeper:
        self._token = requestwatch.push(self)
        if self.log is not None:
            self.log.attach()
            logging.getLogger(f"reconcilers.{self.reconciler.name}").info(
                "%s: verbose run (%s until %s, set by %s)", self.key,
                ",".join(f"{m}={lv}" for m, lv in self.log.setting.modules.items()),
                time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.log.setting.until)),
                self.log.setting.actor or self.log.setting.source)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            requestwatch.pop(self._token)
            self._token = None
        if self.log is not None:
            self.log.detach()

    # -- after the record --------------------------------------------------------------------------------

    def kept(self, run_id: int | None, outcome: Any, keep: bool) -> bool:
        """Store the capture of run `run_id`: its inputs when `keep`, its lines when verbose; whether one was."""
        if run_id is None or (not keep and (self.log is None or not self.log.lines)):
            return False
        kind = self.reconciler.resource
        meta = self.obj.get("metadata") or {}
        packed = None
        if keep:
            try:
                packed = capture.pack(
                    self.capture, key=self.key, kind_version=kind.api_version,
                    operator_version=versions.operator_version(self.reconciler), obj=self.obj,
                    recorded=self.recorded, outcome=outcome,
                    own_path=kube.object_path(kind, meta.get("namespace") or None, meta.get("name") or ""))
            except Exception:  # noqa: BLE001 - a capture never fails a run
                log.warning("could not pack the inputs of %s", self.key, exc_info=True)
        lines = self.log.lines if self.log is not None else []
        return capture_store.capture_keep(
            run_id, packed=packed, kind_version=kind.api_version,
            operator_version=versions.operator_version(self.reconciler),
            log_level=self.log.level_name if self.log is not None else "", log_lines=lines,
            log_lines_dropped=self.log.dropped if self.log is not None else 0)
