"""Per-user throttling of actions (DRF's UserRateThrottle, scope `actions`, rate from
REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["actions"]), counted in Redis so every web process shares the
count. A throttled action answers 429 with Retry-After (and is audited as refused)."""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache
from rest_framework.settings import api_settings
from rest_framework.throttling import UserRateThrottle

from opsconsole.rediscache import redis_cache

THROTTLE_KEY_PREFIX = "opsconsole-throttle"


def throttle_cache() -> RedisCache:
    """The Redis-backed cache the throttle history lives in (one per REDIS_URL)."""
    return redis_cache(THROTTLE_KEY_PREFIX)


class ActionThrottle(UserRateThrottle):
    """At most N actions per user per period (anonymous callers are refused before this counts)."""

    scope = "actions"

    def __init__(self) -> None:
        self.cache = throttle_cache()
        super().__init__()

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)

    def allow_request(self, request: Any, view: Any) -> bool:
        if not getattr(request.user, "is_authenticated", False):
            return True  # 401 comes from the permission check
        return super().allow_request(request, view)
