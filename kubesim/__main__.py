"""``python -m kubesim``: run the emulator (see ``python -m kubesim --help``)."""

import sys

from kubesim.cli import main

sys.exit(main())
