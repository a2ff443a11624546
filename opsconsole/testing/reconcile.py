"""`opsconsole.testing.reconcile` is `reconcilers.authoring.testing.reconcile`:
`reconcile_once` / `reconcile_until`.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import reconcile

sys.modules[__name__] = reconcile
