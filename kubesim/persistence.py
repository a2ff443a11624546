"""``--data-dir`` persistence: an append-only journal of writes plus an atomically replaced JSON snapshot.

On start the snapshot is loaded and the journal replayed (a torn last line is ignored), then a fresh
snapshot is written and the journal emptied. Objects and the resourceVersion counter survive restarts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from kubesim.meta import dumps
from kubesim.store import Key, Store

SNAPSHOT = "snapshot.json"
JOURNAL = "journal.jsonl"


class Persistence:
    """Writes every store change to ``<data_dir>/journal.jsonl``; compacts into ``snapshot.json``."""

    def __init__(self, data_dir: str, compact_every: int = 20000) -> None:
        self.dir = Path(data_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.compact_every = compact_every
        self._journal: Any = None
        self._records = 0
        self._store: Store | None = None

    def load(self, store: Store) -> None:
        """Fill ``store`` from disk, then compact and start journalling its writes."""
        snap = self.dir / SNAPSHOT
        if snap.exists():
            data = json.loads(snap.read_text())
            store.rv = int(data.get("resourceVersion", 0))
            for rec in data.get("objects", []):
                store.load((rec["group"], rec["resource"]), rec["object"])
        journal = self.dir / JOURNAL
        if journal.exists():
            with journal.open() as f:
                for line in f:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        break  # torn write at the end
                    key = (rec["g"], rec["r"])
                    obj = rec["o"]
                    if rec["op"] == "put":
                        store.load(key, obj)
                    else:
                        meta = obj["metadata"]
                        store.unload(key, meta.get("namespace", ""), meta["name"])
                    store.rv = max(store.rv, int(rec["rv"]))
        store.compacted_rv = store.rv
        self._store = store
        self.snapshot()
        store.journal = self

    def record(self, op: str, key: Key, obj: dict[str, Any], rv: int) -> None:
        """Append one write."""
        if self._journal is None:
            self._journal = (self.dir / JOURNAL).open("a", encoding="utf-8")
        self._journal.write(dumps({"op": op, "g": key[0], "r": key[1], "rv": rv, "o": obj}) + "\n")
        self._journal.flush()
        self._records += 1
        if self._records >= self.compact_every:
            self.snapshot()

    def snapshot(self) -> None:
        """Atomically write all objects and the counter, then empty the journal."""
        store = self._store
        if store is None:
            return
        tmp = self.dir / (SNAPSHOT + ".tmp")
        objects = [{"group": k[0], "resource": k[1], "object": o} for k, o in store.all_items()]
        with tmp.open("w", encoding="utf-8") as f:
            f.write(dumps({"resourceVersion": store.rv, "objects": objects}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / SNAPSHOT)
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        (self.dir / JOURNAL).open("w").close()
        self._records = 0

    def close(self) -> None:
        """Final snapshot and close the journal."""
        self.snapshot()
        if self._journal is not None:
            self._journal.close()
            self._journal = None
