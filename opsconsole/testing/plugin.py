"""`opsconsole.testing.plugin` is `reconcilers.authoring.testing.plugin`:
the pytest plugin, which the `pytest11` entry point `opsconsole` names.

This module makes the public name the very same module object (not a copy), so its state and anything a test
patches on it are shared."""

import sys

from reconcilers.authoring.testing import plugin

sys.modules[__name__] = plugin
