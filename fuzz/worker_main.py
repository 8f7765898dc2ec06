"""Entry point of oracle worker processes: ``python -m hloref.fuzz.worker_main ORACLE``."""

import sys

from hloref.fuzz.workers import _child_main

if __name__ == "__main__":
    _child_main(sys.argv[1])
