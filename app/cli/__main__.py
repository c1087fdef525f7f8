"""``python -m tealeaves.app.cli ...``: the ``tealeaves`` command."""

import sys

from . import main

sys.exit(main())
