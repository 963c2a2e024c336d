"""``python -m bench.soak``: the soak with faults (see :mod:`bench.soak`)."""

import sys

from bench.soak.run import main

sys.exit(main())
