"""`python -m host.evals`: the same as `computer-use eval` (for a checkout whose console script points elsewhere)."""

import sys

from host.evals.runner import main

if __name__ == "__main__":
    sys.exit(main())
