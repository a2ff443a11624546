"""The client's address of a request: `REMOTE_ADDR`, unless the peer is a trusted proxy
(`OPSCONSOLE_TRUSTED_PROXIES`, a list of CIDRs): then `X-Forwarded-For` is read right to left, skipping the
trusted hops, and the first address that is not a trusted proxy is the client. A proxy that is not trusted cannot
name a client: the header is ignored, and a forged left part of the header is never reached (only what trusted
hops appended is believed). django-axes (the login lockout and throttle) and the action record use it."""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=8)
def _networks(spec: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(cidr.strip(), strict=False) for cidr in spec if cidr.strip())


def trusted_proxies() -> tuple[Network, ...]:
    """The trusted proxies' networks (settings.OPSCONSOLE_TRUSTED_PROXIES: CIDRs or single addresses)."""
    value = getattr(settings, "OPSCONSOLE_TRUSTED_PROXIES", ()) or ()
    if isinstance(value, str):
        value = value.split(",")
    return _networks(tuple(value))


def _address(text: str) -> Address | None:
    text = text.strip()
    if text.startswith("[") and "]" in text:  # [v6]:port
        text = text[1:text.index("]")]
    elif text.count(":") == 1:  # v4:port
        text = text.split(":", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _trusted(address: Address, networks: tuple[Network, ...]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def client_address(request: Any) -> str:
    """The client's address (see the module docstring); '' when there is none."""
    meta = getattr(request, "META", None) or {}
    remote = str(meta.get("REMOTE_ADDR", "") or "")
    networks = trusted_proxies()
    peer = _address(remote)
    if not networks or peer is None or not _trusted(peer, networks):
        return remote
    hops = [h for h in str(meta.get("HTTP_X_FORWARDED_FOR", "") or "").split(",") if h.strip()]
    client = peer
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:  # garbage: believe no further left than the last good hop
            break
        client = address
        if not _trusted(address, networks):
            break
    return str(client)
