"""The checkpoint files of the audit record (`reconcilers.engine.checkpoint`): where they are, the newest one
read with a clear reason when it is not a checkpoint, and a new one written atomically.

A file is written whole or not at all: the document goes to a hidden temporary file in the same directory,
is flushed to disk, then hard-linked to `checkpoint-<seq>.json` (which fails when another writer took that
seq: the file is created exclusively, never rewritten) and the temporary name removed. A writer killed at any
point leaves at most a hidden temporary file, never an empty or half-written checkpoint. Where the filesystem
has no hard links, the temporary file is renamed instead (after checking the name is free).
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from django.conf import settings


class UnreadableCheckpoint(Exception):
    """A checkpoint file or ConfigMap that holds no checkpoint document: `reason` says what it holds."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(f"{where} {reason}")
        self.where = where
        self.reason = reason


def checkpoint_dir() -> Path:
    """Where the checkpoint files go (settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR)."""
    return Path(settings.OPSCONSOLE_AUDIT_CHECKPOINT_DIR)


def files() -> list[tuple[int, Path]]:
    """Every `checkpoint-<seq>.json` of the directory as (seq, path), oldest first."""
    found = []
    for path in checkpoint_dir().glob("checkpoint-*.json"):
        try:
            found.append((int(path.stem.split("-", 1)[1]), path))
        except ValueError:
            continue
    return sorted(found)


def parse(text: str | bytes, where: str) -> dict[str, Any]:
    """The checkpoint document in `text`; UnreadableCheckpoint naming `where` when it is empty, not JSON or
    JSON that is not an object (`null`, `[]`, a number)."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UnreadableCheckpoint(where, f"is not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
    if not text.strip():
        raise UnreadableCheckpoint(where, "is empty (a writer stopped before it wrote the document?)")
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise UnreadableCheckpoint(where, f"is not JSON ({exc})") from exc
    if not isinstance(doc, dict):
        raise UnreadableCheckpoint(where, f"holds JSON {json.dumps(doc)[:40]}, not a checkpoint document")
    return doc


def read(path: Path) -> dict[str, Any]:
    """The document of the checkpoint file `path` (see `parse`); UnreadableCheckpoint when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableCheckpoint(path.name, f"cannot be read ({exc.strerror or exc})") from exc
    return parse(data, path.name)


def newest() -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint file and its document (None when there is none); UnreadableCheckpoint when the
    newest file holds no checkpoint."""
    found = files()
    if not found:
        return None
    path = found[-1][1]
    return path, read(path)


def write_new(path: Path, doc: dict[str, Any]) -> bool:
    """Write `doc` to `path` atomically and exclusively: False (nothing written) when `path` exists."""
    if path.exists():
        return False
    temporary = path.with_name(f".{path.stem}.{os.getpid()}.tmp")  # hidden: not a `checkpoint-*.json`
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, sort_keys=True, indent=1)
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError:  # no hard links here: a rename, the name checked free just before
            if path.exists():
                return False
            os.replace(temporary, path)
        _sync_directory(path.parent)
        return True
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def _sync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
