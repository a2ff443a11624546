"""`opsconsole.testing.faults` is `reconcilers.authoring.testing.faults`:
`kubesim_faults`: kubesim's failures for one test.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import faults

sys.modules[__name__] = faults
