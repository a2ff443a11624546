"""kubesim: a standalone Kubernetes API emulator with simulated workload controllers.

It serves the Kubernetes REST API (JSON) over HTTP so that the official ``kubernetes`` Python client
and ``kubectl`` talk to it unchanged. Run it with ``python -m kubesim``; in tests use
:func:`kubesim.testing.running_kubesim`.
"""

__version__ = "0.1.0"
KUBE_VERSION = (1, 32, 0)
