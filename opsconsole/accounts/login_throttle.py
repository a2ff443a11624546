"""The per-address login throttle: far above the per-account lockout (django-axes counts failures per
username), it slows one address that tries many accounts without locking anyone out. Failures are counted per
client address (`client_address`: the real client behind a trusted proxy) in a fixed window of
OPSCONSOLE_LOGIN_ADDRESS_WINDOW seconds (60) in Redis, shared by every web process; from the
OPSCONSOLE_LOGIN_ADDRESS_LIMIT-th failure (50) in a window, logins from that address are answered 429 until the
window ends, without a password being checked or any account's count moving. A Redis that does not answer
throttles nothing (the per-account lockout still holds)."""

from __future__ import annotations

import logging
import math
import time

from django.conf import settings
from django.core.cache.backends.redis import RedisCache

from opsconsole.rediscache import redis_cache

log = logging.getLogger(__name__)
KEY_PREFIX = "opsconsole-login-address"


def _now() -> float:
    return time.time()


def _cache() -> RedisCache:
    return redis_cache(KEY_PREFIX)


def _window() -> int:
    return max(1, int(getattr(settings, "OPSCONSOLE_LOGIN_ADDRESS_WINDOW", 60)))


def _key(address: str, now: float) -> str:
    return f"{address}:{int(now // _window())}"


def login_address_failed(address: str) -> None:
    """Count one failed login from `address` in the current window."""
    if not address:
        return
    now = _now()
    key = _key(address, now)
    try:
        cache = _cache()
        cache.add(key, 0, timeout=_window() + 5)
        cache.incr(key)
    except Exception as exc:  # Redis down: the per-account lockout still holds
        log.warning("login throttle not counted for %s: %s", address, exc)


def login_address_wait(address: str) -> int:
    """Seconds until `address` may try to log in again (0: now)."""
    if not address:
        return 0
    now = _now()
    limit = int(getattr(settings, "OPSCONSOLE_LOGIN_ADDRESS_LIMIT", 50))
    try:
        failures = int(_cache().get(_key(address, now)) or 0)
    except Exception as exc:  # Redis down: throttle nothing
        log.warning("login throttle not read for %s: %s", address, exc)
        return 0
    if failures < limit:
        return 0
    return max(1, math.ceil(_window() - now % _window()))
