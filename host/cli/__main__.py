"""``python -m rbscope.cli``: the same as ``rbscope``."""

import sys

from .commands import main

sys.exit(main())
