"""An informer's store: the objects of one kind by key, as the informer last saw them, and the uid → key index.

What it holds of each object is what `keep` makes of it (`slim.py`: the controller's informers drop managedFields
and the last-applied annotation, and keep a stub of each Event), packed by the store's own `slim.Packer` (JSON
deflated against the store's first object: about a tenth of the JSON) and unpacked on every read, or the object as
delivered when `keep` is None. Reads are thread-safe: the informer's thread writes, the
controller's loop and its background steps read.
"""

from __future__ import annotations

import threading
from typing import Any

from reconcilers.engine.controller.slim import Keep, Packer


class ObjectStore:
    """The store (see the module); `index_uids`: keep the uid → key index (`uids`, `key_for_uid`)."""

    def __init__(self, *, keep: Keep | None = None, index_uids: bool = True) -> None:
        self.keep = keep
        self.index_uids = index_uids
        self._packer = Packer()
        self._lock = threading.Lock()
        self._cache: dict[str, Any] = {}  # key -> packed bytes (`keep`) or the object as delivered
        self._uids: dict[str, str] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored object of one key."""
        with self._lock:
            stored = self._cache.get(key)
        return self._load(stored) if stored is not None else None

    def __contains__(self, key: object) -> bool:
        """Whether the store has `key` (without unpacking its object)."""
        with self._lock:
            return key in self._cache

    def __len__(self) -> int:
        """How many objects the store holds (without listing its keys)."""
        with self._lock:
            return len(self._cache)

    def keys(self) -> list[str]:
        """Every stored key."""
        with self._lock:
            return list(self._cache)

    def items(self) -> list[dict[str, Any]]:
        """Every stored object."""
        with self._lock:
            stored = list(self._cache.values())
        return [self._load(value) for value in stored]

    def uids(self) -> set[str]:
        """The uid of every stored object (empty without `index_uids`)."""
        with self._lock:
            return set(self._uids)

    def key_for_uid(self, uid: str) -> str | None:
        """The key of the stored object with this uid (None without `index_uids`)."""
        with self._lock:
            return self._uids.get(uid)

    def absent_from(self, listed: set[str]) -> list[tuple[str, dict[str, Any]]]:
        """The stored keys and objects that `listed` (the keys a list returned) does not have."""
        with self._lock:
            gone = [(key, stored) for key, stored in self._cache.items() if key not in listed]
        return [(key, self._load(stored)) for key, stored in gone]

    def replace(self, deleted: bool, key: str, obj: dict[str, Any]) -> dict[str, Any] | None:
        """Store `obj` under `key` (or remove the key when `deleted`), keeping the uid index; returns what was
        stored before (None: nothing)."""
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        stored = self._store(obj) if not deleted else None
        with self._lock:
            before = self._cache.get(key)
            old = self._load(before) if before is not None else None
            if deleted:
                if old is not None:
                    del self._cache[key]
            else:
                self._cache[key] = stored
            if self.index_uids:
                if old is not None:
                    self._uids.pop(str(old["metadata"].get("uid") or ""), None)
                if not deleted:
                    self._uids[uid] = key
        return old

    def _store(self, obj: dict[str, Any]) -> Any:
        """What the store holds for `obj`."""
        return self._packer.pack(self.keep(obj)) if self.keep is not None else obj

    def _load(self, stored: Any) -> dict[str, Any]:
        """A stored object as a dict."""
        return self._packer.unpack(stored) if isinstance(stored, bytes) else stored
