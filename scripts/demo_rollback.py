"""`make run`'s self-healing demo: once the sample `memcached-rollback` (deploy/samples/rollback-demo.yaml) is
Running at its first generation, change its image to a tag the sandbox cluster cannot pull, as a person's bad
change would (field manager `demo-bad-change`), then stay idle.

The engine then rolls it back by itself (docs/healing.md). Only on the embedded sandbox cluster, once: an object
past its first generation (a restart, or one a person changed) is left alone. `OPSCONSOLE_DEMO_ROLLBACK=0` turns it
off. It is one of `make run`'s processes, so it stays alive until Ctrl-C (honcho stops all when one exits).
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

NAME, NAMESPACE = "memcached-rollback", "default"
BROKEN_IMAGE = "memcached:1.6-broken"
FIELD_MANAGER = "demo-bad-change"
GROUP, VERSION, PLURAL = "cache.example.com", "v1alpha1", "memcacheds"


def break_when_running(api: Any, *, namespace: str = NAMESPACE, name: str = NAME, timeout: float = 180.0,
                       interval: float = 1.0) -> str:
    """Wait until the object is Running at generation 1, then patch its image: 'broken', 'skipped' (past its
    first generation) or 'timeout'."""
    from kubernetes import client

    objects = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            obj = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        except Exception:  # the API or the CRD is not up yet, or the sample not created yet
            obj = None
        if obj is not None:
            if int(obj["metadata"].get("generation") or 0) > 1:
                return "skipped"
            if (obj.get("status") or {}).get("phase") == "Running":
                objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                       {"spec": {"image": BROKEN_IMAGE}}, field_manager=FIELD_MANAGER)
                return "broken"
        time.sleep(interval)
    return "timeout"


def connect(timeout: float = 120.0) -> Any:
    """An ApiClient from $KUBECONFIG once the sandbox cluster has written it (None after `timeout`)."""
    from kubernetes import config

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return config.new_client_from_config()
        except Exception:  # not written yet
            time.sleep(0.5)
    return None


def main() -> None:
    """Run the demo against $KUBECONFIG, then idle until stopped; never fails `make run`."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        api = connect()
        outcome = break_when_running(api) if api is not None else "no cluster"
    except Exception as exc:  # a demo must not stop the product
        outcome = f"failed: {type(exc).__name__}: {exc}"
    if outcome == "broken":
        print(f"demo: changed {NAMESPACE}/{NAME}'s image to {BROKEN_IMAGE} (a bad change); watch the console roll "
              "it back (Resources -> memcached-rollback)", flush=True)
    elif outcome not in ("skipped",):
        print(f"demo: the self-healing demo did not run ({outcome})", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
