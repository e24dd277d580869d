"""`python -m eqsat` is the `eqsat` command."""

import sys

from eqsat.cli import main

sys.exit(main())
