"""What the bounded-dynamic-shape tests (tests/test_dynamic_shapes*.py) share:
module texts used by more than one file."""

from __future__ import annotations


ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}
"""


def slice_module(op_line):
    return f"""HloModule m
{ADD}
ENTRY e {{
  p = f32[6] parameter(0)
  n = s32[] parameter(1)
  s = f32[<=6] set-dimension-size(p, n), dimensions={{0}}
  {op_line}
}}
"""
