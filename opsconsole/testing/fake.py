"""`opsconsole.testing.fake` is `reconcilers.authoring.testing.fake`:
`FakeContext`.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import fake

sys.modules[__name__] = fake
