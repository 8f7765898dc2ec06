"""Entry point of oracle worker processes: ``python -m hloref.fuzz.worker_main ORACLE``,
and of the process that forks them: ``... --zygote ORACLE FD`` (``workers._Zygote``)."""

import sys

from hloref.fuzz.workers import child_main, zygote_main

if __name__ == "__main__":
    if sys.argv[1] == "--zygote":
        zygote_main(sys.argv[2], int(sys.argv[3]))
    else:
        child_main(sys.argv[1])
