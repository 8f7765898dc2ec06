"""ci/conformance.py: module extraction from C++ test sources and the comparison rule."""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "ci"))
import conformance  # noqa: E402

CPP = r'''
constexpr char kHlo[] = R"(
HloModule a
ENTRY e { ROOT p = f32[] parameter(0) }
)";
const char* not_hlo = R"(just text)";
auto m = ParseAndReturnVerifiedModule(R"hlo(
ENTRY f { ROOT q = s32[] parameter(0) }
)hlo");
'''


def test_raw_string_literals_with_entry_are_extracted(tmp_path):
    found = list(conformance.literals_of(CPP))
    assert [line for line, _ in found] == [2, 7]
    assert "HloModule a" in found[0][1] and "ENTRY f" in found[1][1]
    src = tmp_path / "xla" / "service"
    src.mkdir(parents=True)
    (src / "x_test.cc").write_text(CPP + CPP)  # duplicates are scored once
    (src / "x.cc").write_text(CPP)             # not a test file
    cases = conformance.extract(str(tmp_path))
    assert len(cases) == 2
    assert sorted(len(c.locations) for c in cases) == [2, 2]
    assert cases[0].locations[0].startswith("xla/service/x_test.cc:")


def test_multi_device_header():
    assert conformance._multi_device("HloModule m, replica_count=1, num_partitions=4\n")
    assert not conformance._multi_device("HloModule m, replica_count=1\nENTRY e {}")


def test_compare_exact_rounding_and_mismatch():
    a = np.array([1.0, 2.0, 3.0], np.float32)
    assert conformance.compare(a, a.copy())[0] == "match"
    # a 1e-5 relative difference at the output's scale: accumulated rounding
    assert conformance.compare(a, a + np.float32(3e-5))[0] == "rounding"
    assert conformance.compare(a, a + np.float32(0.5))[0] == "mismatch"
    assert conformance.compare(np.array([1, 2], np.int32), np.array([1, 3], np.int32))[0] == "mismatch"
