"""Entry point of oracle worker processes: ``python -m hloref.fuzz.worker_main ORACLE``."""

import sys

from hloref.fuzz.workers import child_main

if __name__ == "__main__":
    child_main(sys.argv[1])
