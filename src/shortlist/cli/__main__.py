"""Allow ``python -m shortlist.cli``."""

import sys

from shortlist.cli import main

sys.exit(main())
