"""The Merkle tree of the signed audit checkpoints (RFC 6962, as certificate transparency): a canonical JSON
encoding, leaf hashes and the tree hash. Pure functions (hashlib, json)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical(doc: Any) -> bytes:
    """Keys sorted, no whitespace, UTF-8: the bytes that are hashed and signed."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def leaf_hash(leaf: list[Any]) -> bytes:
    """sha256(0x00 || canonical JSON of the leaf)."""
    return hashlib.sha256(b"\x00" + canonical(leaf)).digest()


def merkle_root(hashes: list[bytes]) -> bytes:
    """RFC 6962's Merkle tree hash of the leaf hashes (interior `sha256(0x01 || left || right)`, the split at the
    largest power of two below the size; the empty tree `sha256("")`)."""
    if not hashes:
        return hashlib.sha256(b"").digest()
    if len(hashes) == 1:
        return hashes[0]
    split = 1 << ((len(hashes) - 1).bit_length() - 1)
    return hashlib.sha256(b"\x01" + merkle_root(hashes[:split]) + merkle_root(hashes[split:])).digest()
