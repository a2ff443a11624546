"""Live verbosity per object, kind or module: an operator turns one object's (or one kind's, or every) runs to
`reconcile=debug` and/or `client=debug` until an expiry, and the workers log those runs at that level and keep the
lines with the run (`RunCapture.log_lines`, bounded), shown on the run's page. Nothing needs a restart, and the
setting switches itself off at its expiry.

Where a setting comes from:
- the console or the API (`reconcilers.services.verbosity`, audited): one field per scope (`object:<key>`,
  `kind:<Kind>`, `all`) in the Redis hash `<queue name>:verbosity` (beside the workqueue), its value JSON with the
  modules, the expiry (`until`, epoch seconds), who set it and when. A worker reads the hash at most every
  `REFRESH_SECONDS` (one HGETALL per process, not per run); an expired setting is ignored at once.
- an annotation on the object: `opsconsole.io/verbosity: "reconcile=debug,client=debug"` with
  `opsconsole.io/verbosity-until: <RFC 3339>` (no expiry, or one more than `MAX_SECONDS` ahead: ignored, logged).
  Who set it is in the admission record, as for every write.
The object's own setting wins over its kind's, which wins over `all`; the annotation wins over the hash.

Modules: `reconcile` (the reconciler's logger `reconcilers.<name>` and the step's), `client` (each Kubernetes request
of the run: method, path, answer), `engine` (all of `reconcilers.engine`). Levels: debug, info, warning.
No Django here.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from reconcilers.core.meta import parse_rfc3339
from reconcilers.core.types import Request

#: the Redis hash of the settings, beside its workqueue's keys: `<queue name>:verbosity`
HASH_SUFFIX = ":verbosity"
ANNOTATION = "opsconsole.io/verbosity"
ANNOTATION_UNTIL = "opsconsole.io/verbosity-until"
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
MODULES = ("reconcile", "client", "engine")
#: the client module's logger (one line per request of a verbose run)
CLIENT_LOGGER = "reconcilers.engine.kube.requests"
#: the longest a setting may last
MAX_SECONDS = 24 * 3600.0
REFRESH_SECONDS = 2.0
MAX_LINES = 300
MAX_LINE = 1000

log = logging.getLogger(__name__)


class VerbosityError(ValueError):
    """A setting that cannot be: `field` names what is wrong."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass
class Setting:
    """One scope's verbosity: its modules and levels, until when (epoch seconds), who set it and when."""

    scope: str
    modules: dict[str, str]
    until: float
    actor: str = ""
    set_at: float = 0.0
    source: str = "console"

    def as_dict(self) -> dict[str, Any]:
        """As stored and answered."""
        return asdict(self)


def parse_modules(text: str) -> dict[str, str]:
    """`reconcile=debug,client=debug` (a bare `debug` means every module) as {module: level}."""
    text = (text or "").strip()
    if not text:
        raise VerbosityError("name at least one module=level (reconcile=debug, client=debug)", "modules")
    if text in LEVELS:
        return dict.fromkeys(MODULES, text)
    out = {}
    for part in text.split(","):
        module, _, level = part.strip().partition("=")
        if module not in MODULES:
            raise VerbosityError(f"unknown module {module!r} (known: {', '.join(MODULES)})", "modules")
        if level not in LEVELS:
            raise VerbosityError(f"unknown level {level!r} for {module} (known: {', '.join(LEVELS)})", "modules")
        out[module] = level
    return out


def _is_key(key: str) -> bool:
    """Whether `key` is a workqueue key, of the default cluster (five parts) or another (six)."""
    try:
        Request.from_key(key)
    except ValueError:
        return False
    return True


def scope_check(scope: str) -> str:
    """A scope: `object:<workqueue key>` (either form: `[cluster/]group/version/plural/namespace/name`),
    `kind:<Kind>` or `all`."""
    if scope == "all" or (scope.startswith("kind:") and 0 < len(scope) - 5 <= 63) or (
            scope.startswith("object:") and len(scope) <= 1100 and _is_key(scope[7:])):
        return scope
    raise VerbosityError("scope must be object:<[cluster/]group/version/plural/namespace/name>, kind:<Kind> or all",
                         "scope")


@dataclass(frozen=True)
class Store:
    """Where the settings are: a Redis client and the hash's key (`Store.of(queue)`: beside a workqueue)."""

    redis: Any
    key: str

    @classmethod
    def of(cls, queue: Any) -> Store:
        """The store of a `WorkQueue` (its Redis, `<its name>:verbosity`)."""
        return cls(queue.redis, f"{queue.name}{HASH_SUFFIX}")


def setting_store(store: Store, setting: Setting) -> None:
    """Store a setting (and drop the expired ones)."""
    scope_check(setting.scope)
    store.redis.hset(store.key, setting.scope, json.dumps(setting.as_dict()))
    _prune(store)


def setting_clear(store: Store, scope: str) -> bool:
    """Remove a scope's setting; whether there was one."""
    return bool(store.redis.hdel(store.key, scope_check(scope)))


def settings_read(store: Store, now: float | None = None) -> dict[str, Setting]:
    """The settings in force (expired ones left out)."""
    now = time.time() if now is None else now
    out = {}
    for scope, raw in (store.redis.hgetall(store.key) or {}).items():
        try:
            data = json.loads(raw)
            setting = Setting(**data)
        except (TypeError, ValueError):
            continue
        if setting.until > now:
            out[scope.decode() if isinstance(scope, bytes) else scope] = setting
    return out


def _prune(store: Store) -> None:
    now = time.time()
    for scope, raw in (store.redis.hgetall(store.key) or {}).items():
        try:
            if float(json.loads(raw).get("until") or 0) <= now:
                store.redis.hdel(store.key, scope)
        except (TypeError, ValueError, AttributeError):
            store.redis.hdel(store.key, scope)


class SettingsCache:
    """The settings in force as this process last read them, per store (at most every `REFRESH_SECONDS`); an
    unreadable Redis means none (a verbosity is never a reason to fail a run)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._read: dict[str, tuple[float, dict[str, Setting]]] = {}

    def get(self, store: Store | None, now: float | None = None) -> dict[str, Setting]:
        if store is None:
            return {}
        mono = time.monotonic()
        with self._lock:
            read_at, current = self._read.get(store.key, (-1e18, {}))
            if mono - read_at >= REFRESH_SECONDS:
                try:
                    current = settings_read(store)
                except Exception:  # noqa: BLE001
                    log.debug("verbosity settings unreadable", exc_info=True)
                    current = {}
                self._read[store.key] = (mono, current)
        now = time.time() if now is None else now
        return {scope: s for scope, s in current.items() if s.until > now}

    def forget(self) -> None:
        """Read again at the next `get` (tests, and a setter in the same process)."""
        with self._lock:
            self._read.clear()


CACHE = SettingsCache()


def from_annotation(obj: Mapping[str, Any], now: float | None = None) -> Setting | None:
    """The object's own verbosity annotation, if set and not expired."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(ANNOTATION)
    if not text:
        return None
    now = time.time() if now is None else now
    until = parse_rfc3339(annotations.get(ANNOTATION_UNTIL))
    if until is None or until.timestamp() > now + MAX_SECONDS:
        log.info("%s ignored: %s must name an expiry within %d hours", ANNOTATION, ANNOTATION_UNTIL,
                 int(MAX_SECONDS // 3600))
        return None
    if until.timestamp() <= now:
        return None
    try:
        modules = parse_modules(text)
    except VerbosityError as exc:
        log.info("%s ignored: %s", ANNOTATION, exc)
        return None
    return Setting("annotation", modules, until.timestamp(), source="annotation")


def levels_for(settings: Mapping[str, Setting], key: str, kind: str, obj: Mapping[str, Any] | None,
               now: float | None = None) -> Setting | None:
    """The setting that applies to one run (annotation, object, kind, all: the first found), or None."""
    found = from_annotation(obj, now) if obj is not None else None
    return found or settings.get(f"object:{key}") or settings.get(f"kind:{kind}") or settings.get("all")


class RunLog(logging.Handler):
    """The log lines of one verbose run: attached to its modules' loggers (their levels lowered for the run and put
    back after), taking only this thread's records, bounded (`MAX_LINES`, each cut to `MAX_LINE`)."""

    def __init__(self, setting: Setting, reconciler_name: str) -> None:
        super().__init__(logging.DEBUG)
        self.setting = setting
        self.lines: list[str] = []
        self.dropped = 0
        self._thread = threading.get_ident()
        self._last: logging.LogRecord | None = None
        self._loggers: list[tuple[logging.Logger, int]] = []
        names = {"reconcile": (f"reconcilers.{reconciler_name}", "reconcilers.engine.step",
                               "reconcilers.engine.context"),
                 "client": (CLIENT_LOGGER,), "engine": ("reconcilers.engine",)}
        self.levels = {name: LEVELS[level] for module, level in setting.modules.items() for name in names[module]}
        self.client_level = LEVELS.get(setting.modules.get("client", ""), 0)

    @property
    def level_name(self) -> str:
        """The lowest level asked for, by name."""
        lowest = min(self.levels.values()) if self.levels else logging.INFO
        return logging.getLevelName(lowest).lower()

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread != self._thread or record is self._last:  # a record seen by two of our loggers: once
            return
        self._last = record
        wanted = self.levels.get(record.name)
        if wanted is None:
            wanted = next((lv for name, lv in self.levels.items() if record.name.startswith(name + ".")),
                          logging.CRITICAL + 1)
        if record.levelno < wanted:
            return
        if len(self.lines) >= MAX_LINES:
            self.dropped += 1
            return
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is the caller's; keep its template
            text = str(record.msg)
        stamp = time.strftime("%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}"
        self.lines.append(f"{stamp} {record.levelname:<7} {record.name}: {text}"[:MAX_LINE])

    def attach(self) -> None:
        for name, level in self.levels.items():
            logger = logging.getLogger(name)
            self._loggers.append((logger, logger.level))
            if logger.getEffectiveLevel() > level:
                logger.setLevel(level)
            logger.addHandler(self)

    def detach(self) -> None:
        for logger, level in self._loggers:
            logger.removeHandler(self)
            logger.setLevel(level)
        self._loggers.clear()
