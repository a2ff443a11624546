"""kubesim's settings: listening address, auth, persistence, watch tuning, nodes and zones, kubelet delays, faults."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

#: the zones of a new cluster's Nodes (label ``topology.kubernetes.io/zone``)
DEFAULT_ZONES = ("zone-a", "zone-b", "zone-c")


@dataclass
class Faults:
    """Server-side fault injection (changeable at runtime through ``/kubesim/faults``)."""

    error_rate: float = 0.0  # share of API requests answered with ``error_code``
    error_code: int = 500  # 500 (InternalError) or 429 (TooManyRequests with Retry-After)
    retry_after: int = 1  # seconds, for 429
    latency: float = 0.0  # seconds added to API requests (to a ``latency_rate`` share of them)
    latency_rate: float = 1.0  # share of API requests delayed by ``latency`` (1 = every one)
    watch_cut_after: int = 0  # end watch streams after this many events (0 = never)
    watch_cut_interval: float = 0.0  # drop the connection of every watch this many seconds after it opened
    methods: list[str] = field(default_factory=list)  # only these HTTP methods (empty = all)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def update(self, values: dict[str, Any]) -> None:
        """Change some fields; unknown names raise ValueError."""
        names = {f.name: f for f in fields(self)}
        for key, value in values.items():
            if key not in names:
                raise ValueError(f"unknown fault {key!r}; known: {', '.join(names)}")
            current = getattr(self, key)
            if isinstance(current, bool):
                value = bool(value)
            elif isinstance(current, int):
                value = int(value)
            elif isinstance(current, float):
                value = float(value)
            elif isinstance(current, list):
                value = [str(v).upper() for v in value]
            setattr(self, key, value)
        if self.error_code not in (429, 500, 503):
            raise ValueError("error_code must be 429, 500 or 503")

    def clear(self) -> None:
        """Back to no faults."""
        fresh = Faults()
        for f in fields(self):
            setattr(self, f.name, getattr(fresh, f.name))


@dataclass
class KubeletOptions:
    """Timings and failure markers of the simulated kubelet and scheduler."""

    schedule_delay: float = 0.05  # Pending (unscheduled) -> bound to the node
    start_delay: float = 0.2  # bound -> Running (containers started)
    ready_delay: float = 0.2  # Running -> Ready
    terminate_delay: float = 0.1  # a gracefully deleted Pod's containers stop, then the Pod goes
    image_pull_backoff: float = 10.0  # ImagePullBackOff -> next pull attempt, doubling per failed attempt
    image_pull_backoff_max: float = 300.0  # the cap of that doubling (the real kubelet's 10 s and 300 s)
    broken_image_markers: list[str] = field(default_factory=lambda: ["broken", "imagepullbackoff", "doesnotexist"])
    crash_image_markers: list[str] = field(default_factory=lambda: ["crashloop", "crash"])
    node_name: str = "kubesim-node"


@dataclass
class Options:
    """Everything kubesim can be configured with (CLI flags map onto these)."""

    host: str = "127.0.0.1"
    port: int = 6443
    token: str | None = None  # bearer token; None disables authentication
    token_auth_file: str | None = None  # kube-apiserver's --token-auth-file: token,user,uid,"group1,group2"
    authorization_mode: str = "AlwaysAllow"  # or "RBAC" (roles and bindings enforced, 403 Forbidden)
    webhook_client_cert: str | None = None  # PEM certificate (and key) kubesim presents to admission and
    webhook_client_key: str | None = None  # conversion webhooks that ask for one (mutual TLS)
    tls: bool = False  # serve HTTPS (kubectl only sends a bearer token over TLS)
    tls_cert: str | None = None  # PEM files; generated with openssl when tls is on and these are unset
    tls_key: str | None = None
    data_dir: str | None = None
    history_size: int = 10000  # events kept for watch replay (older resourceVersions get 410 Gone)
    bookmark_interval: float = 60.0  # seconds between BOOKMARK events on watches that allow them
    default_watch_timeout: float = 1800.0
    controllers: bool = True  # run the simulated controllers (deployments, kubelet, GC, namespaces)
    kubelet: KubeletOptions = field(default_factory=KubeletOptions)
    faults: Faults = field(default_factory=Faults)
    gc_interval: float = 2.0  # periodic garbage-collector sweep
    nodes: int = 3  # Nodes registered on a new cluster (1: the single node ``kubelet.node_name``)
    zones: list[str] = field(default_factory=lambda: list(DEFAULT_ZONES))  # node i is in zones[i % len(zones)]
