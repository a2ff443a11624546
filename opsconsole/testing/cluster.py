"""`opsconsole.testing.cluster` is `reconcilers.authoring.testing.cluster`:
the sandbox cluster of a test session (kubesim, CRDs, namespaces).

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import cluster

sys.modules[__name__] = cluster
