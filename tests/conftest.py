"""Shared by every test file: this folder is on ``sys.path``, so the test files here and
in ``gpu/`` import the shared tables and builders by their module names:

- ``hlo_modules``: module texts several files run (``MODULES``), and builders for the
  parts the module texts repeat (parameters, rng-state reads, counted loops...);
- ``hlo_builders``: single-op modules, input values per element type, ``run_both``
  (hloref and XLA:CPU) and the deliberate differences from XLA:CPU;
- ``collective_modules``: multi-device modules and their values by hand;
- ``parser_common``, ``verifier_common``, ``envelope_common``, ``known_gaps_common``,
  ``realistic_common``, ``dynamic_shapes_common``: what one family of test files shares;
- ``gpu/gpu_check.py`` (``gpu/`` only): the GPU backend checked against the CPU backend
  and XLA:CPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
