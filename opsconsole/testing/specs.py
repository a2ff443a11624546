"""`opsconsole.testing.specs` is `reconcilers.authoring.testing.specs`:
`SpecRejected` and the spec a test gives.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import specs

sys.modules[__name__] = specs
