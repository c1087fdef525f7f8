"""``python -m tealeaves.app.cli ...``: the ``tealeaves`` command."""

import sys

from tealeaves.app.cli import main

sys.exit(main())
