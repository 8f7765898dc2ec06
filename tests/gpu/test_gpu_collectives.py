"""replica-id and partition-id on the GPU backend (single-device modules: device 0),
against the cpu backend and XLA:CPU."""

from __future__ import annotations

from gpu_check import check


def test_replica_and_partition_id_single_device():
    text = """HloModule r
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
"""
    out = check(text, xla="required")
    assert [int(v) for v in out] == [0, 0]
