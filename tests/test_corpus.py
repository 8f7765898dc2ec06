"""The seed corpus (``fuzz/corpus.py``): ``--corpus DIR`` of HLO files or an
``--xla_dump_to`` directory, examples, type filtering, reasons for what is left out."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("jax")

from hloref.fuzz.corpus import element_types_of, load_corpus  # noqa: E402

GOOD = "HloModule g\n\nENTRY e {\n  a = bf16[4] parameter(0)\n  ROOT n = bf16[4] negate(a)\n}\n"
BAD = "HloModule b\n\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[5] negate(a)\n}\n"
F8 = GOOD.replace("bf16", "f8e5m2")


def _write(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def test_a_directory_of_hlo_files(tmp_path):
    _write(tmp_path / "good.hlo", GOOD)
    _write(tmp_path / "bad.hlo", BAD)
    _write(tmp_path / "f8.txt", F8)
    _write(tmp_path / "notes.md", "not HLO")
    c = load_corpus(realistic="none", examples=False, dirs=[str(tmp_path)])
    names = [os.path.basename(n) for n in c.names()]
    assert names == ["f8.txt", "good.hlo"]
    (bad,) = [v for k, v in c.skipped.items() if k.endswith("bad.hlo")]
    assert bad.startswith("does not verify")
    mainstream = load_corpus(realistic="none", examples=False, dirs=[str(tmp_path)],
                             types=("f32", "bf16", "f16", "s32", "pred"))
    assert [os.path.basename(n) for n in mainstream.names()] == ["good.hlo"]
    assert any("f8e5m2 (outside --types)" in v for v in mainstream.skipped.values())


def test_an_xla_dump_directory_gives_its_modules_before_optimizations(tmp_path):
    _write(tmp_path / "module_0001.jit_f.before_optimizations.txt", GOOD)
    _write(tmp_path / "module_0001.jit_f.cpu_after_optimizations.txt", GOOD)
    _write(tmp_path / "module_0001.jit_f.0001.p.after_algsimp.before_dce.txt", GOOD)
    c = load_corpus(realistic="none", examples=False, dirs=[str(tmp_path)])
    assert [os.path.basename(n) for n in c.names()] == ["module_0001.jit_f.before_optimizations.txt"]


def test_examples_are_seeds_and_a_missing_directory_is_an_error(tmp_path):
    c = load_corpus(realistic="none")
    assert any(n.endswith("mlp.hlo") for n in c.names())
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_corpus(realistic="none", dirs=[str(tmp_path / "nope")])


def test_element_types_of_reads_shapes():
    assert element_types_of(F8) == {"f8e5m2"}
    assert element_types_of(GOOD.replace("ROOT n = bf16[4]", "ROOT n = (bf16[4], s32[])")) \
        >= {"bf16", "s32"}
