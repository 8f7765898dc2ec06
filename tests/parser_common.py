"""What the parser tests (tests/test_parser*.py) share: XLA's own parser as a
check, and the three-way round trip."""

from __future__ import annotations

import pytest

from hloref.parser import parse_module
from hloref.printer import module_to_text


def xla_client():
    xla_client = pytest.importorskip("jaxlib.xla_client")
    return xla_client


def xla_accepts(text: str) -> None:
    """XLA's own parser must accept ``text`` (raises otherwise)."""
    xc = xla_client()
    xc.hlo.hlo_module_from_text(text)


def roundtrip(text: str, filename: str | None = None, check_xla: bool = True):
    m = parse_module(text, filename)
    out = module_to_text(m)
    m2 = parse_module(out)
    assert m2 == m, f"reparse differs for {filename}"
    assert module_to_text(m2) == out, f"printer not a fixed point for {filename}"
    if check_xla:
        xla_accepts(out)
    return m
