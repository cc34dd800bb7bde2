"""`computer-use serve` with SIGTERM left to Python's default action (what it did before it handled the signal): the
negative control of `test_signals.py`, run as `python -m suites.reliability.serve_variant serve ...`.

It changes the runtime's CLI through its `STOP_SIGNALS` seam, from outside the runtime, and is otherwise the same
command.
"""

from __future__ import annotations

import signal
import sys

from runtime import cli

if __name__ == "__main__":
    cli.STOP_SIGNALS = (signal.SIGINT,)
    sys.exit(cli.main())
