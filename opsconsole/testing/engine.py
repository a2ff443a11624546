"""`opsconsole.testing.engine` is `reconcilers.authoring.testing.engine`:
the whole engine as subprocesses (`opsconsole_engine`).

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import engine

sys.modules[__name__] = engine
