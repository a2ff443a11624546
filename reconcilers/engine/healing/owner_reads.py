"""The owner resolver's reads from the API (`owners.OwnerResolver`): an object by GET (one not granted or not
served leads nowhere; another error fails the batch, tried again later), the objects of a kind in a namespace by
LIST in pages, and, after a burst, the objects of one hop read with one LIST per kind and namespace instead of a GET
each (`prefetch`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from reconcilers.engine import kube
from reconcilers.engine.healing.lineage import ObjectRef

log = logging.getLogger("reconcilers.engine.healing.owners")

#: from this many unknown objects of one kind in one namespace on one hop of a batch, the resolver reads them with
#: one LIST (at most LIST_PAGE_FACTOR times as many objects, LIST_PAGE_MIN at least, in pages of LIST_PAGE; what it
#: lacks is GET) instead of a GET each: after a burst, the Events of hundreds of new Pods and ReplicaSets
LIST_AT = 8
LIST_PAGE_FACTOR = 4
LIST_PAGE_MIN = 500
LIST_PAGE = 100

Fetched = dict[str, dict[str, Any] | None]  # uid -> the object read (a hop's prefetched objects)


class OwnerReads:
    """The resolver's reads of `api` (or of `get` and `list_page`, tests' stand-ins), counted in `api_calls`."""

    def __init__(self, api: Any, *, get: Callable[[ObjectRef], dict[str, Any] | None] | None = None,
                 list_page: Callable[[ObjectRef, int], list[dict[str, Any]]] | None = None) -> None:
        self.api = api
        self._get = get or self._get_live
        self._list = list_page or self._list_live
        self.api_calls = 0  # objects read from the API (tests, logs)

    def _get_live(self, ref: ObjectRef) -> dict[str, Any] | None:
        kind = kube.kind_for(self.api, ref.api_version, ref.kind)
        if kind is None:
            return None
        return kube.get_object(self.api, kind, ref.namespace if kind.namespaced else None, ref.name,
                               timeout=(2.0, 5.0))

    def _list_live(self, ref: ObjectRef, limit: int) -> list[dict[str, Any]]:
        """Up to `limit` objects of `ref`'s kind in its namespace (`ref`'s name and uid unused), in pages of
        LIST_PAGE (the API server serves each page without holding up the others' requests for long)."""
        kind = kube.kind_for(self.api, ref.api_version, ref.kind)
        if kind is None:
            return []
        items: list[dict[str, Any]] = []
        token: str | None = None
        while len(items) < limit:
            page = kube.list_objects(self.api, kind, ref.namespace if kind.namespaced else None,
                                     limit=min(LIST_PAGE, limit - len(items)), continue_token=token,
                                     timeout=(2.0, 10.0))
            items.extend(page.items)
            token = page.continue_token
            if not token:
                break
        return items

    def prefetch(self, level: list[ObjectRef], fetched: Fetched) -> None:
        """Read with one LIST per kind and namespace the objects of `level` not `fetched` yet, where LIST_AT or more
        of them share both; every object the page holds goes into `fetched` by uid. A LIST not granted or not
        served leaves them to their GETs."""
        groups: dict[tuple[str, str, str], list[ObjectRef]] = {}
        for ref in level:
            if ref.uid not in fetched:
                groups.setdefault((ref.api_version, ref.kind, ref.namespace), []).append(ref)
        for (api_version, kind, namespace), members in groups.items():
            if len(members) < LIST_AT:
                continue
            self.api_calls += 1
            try:
                items = self._list(ObjectRef(api_version, kind, namespace, "", ""),
                                   max(LIST_PAGE_MIN, LIST_PAGE_FACTOR * len(members)))
            except kube.ApiException as exc:
                if exc.status not in (403, 404, 405):
                    raise
                log.debug("event archive: %s in %s not listed: HTTP %s", kind, namespace, exc.status)
                continue
            for obj in items:
                uid = str((obj.get("metadata") or {}).get("uid") or "")
                if uid:
                    fetched[uid] = obj

    def read(self, ref: ObjectRef, fetched: Fetched | None = None) -> dict[str, Any] | None:
        """The object `ref` names, from `fetched` or a GET (None: gone, replaced by another of its name, not granted
        or not served)."""
        if fetched is not None and ref.uid in fetched:
            return fetched[ref.uid]
        self.api_calls += 1
        try:
            obj = self._get(ref)
        except kube.ApiException as exc:
            if exc.status not in (403, 404, 405):  # the API in trouble: the batch is tried again later
                raise
            # not granted, or nothing serves it: this object leads nowhere
            log.debug("event archive: %s %s/%s not read: HTTP %s", ref.kind, ref.namespace, ref.name, exc.status)
            return None
        if obj is None or str((obj.get("metadata") or {}).get("uid") or "") != ref.uid:
            return None  # gone, or another object under the same name now
        return obj
