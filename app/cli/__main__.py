"""`python -m app.cli`: the `batchd` command."""

import sys

from app.cli import main

sys.exit(main())
