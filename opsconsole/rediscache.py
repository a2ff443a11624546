"""Django caches in the installation's Redis (REDIS_URL), one per key prefix and URL, shared by every web process:
where counts must hold across processes (the API's action throttle, the login address throttle)."""

from __future__ import annotations

import threading

from django.conf import settings
from django.core.cache.backends.redis import RedisCache

_lock = threading.Lock()
_caches: dict[tuple[str, str], RedisCache] = {}


def redis_cache(prefix: str) -> RedisCache:
    """The Redis-backed cache whose keys start with `prefix` (made once per REDIS_URL and prefix)."""
    key = (settings.REDIS_URL, prefix)
    with _lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = RedisCache(key[0], {"KEY_PREFIX": prefix})
        return cache
