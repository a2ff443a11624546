"""`opsconsole.testing.kinds` is `reconcilers.authoring.testing.kinds`:
which kinds a test session tests.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import kinds

sys.modules[__name__] = kinds
