"""The API's semantics, independent of HTTP: create, read, update, patch and delete with Kubernetes rules.

The HTTP handlers and the simulated controllers both go through :class:`Cluster`, so every write —
whoever makes it — follows the same resourceVersion, generation, status-subresource and finalizer rules.
"""

from kubesim.cluster.core import Cluster
from kubesim.cluster.options import WriteOptions

__all__ = ["Cluster", "WriteOptions"]
