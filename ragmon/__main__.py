"""``python -m ragmon`` == ``ragmon``."""

import sys

from .cli import main

sys.exit(main())
