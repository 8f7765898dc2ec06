"""The seed corpus of real programs that mutation campaigns start from.

Three sources, none of them committed third-party code:

* the JAX programs of ``tests/realistic_programs.py`` (a repository checkout),
  lowered to HLO when the campaign starts. Lowering takes seconds per program, so it
  runs once, in a subprocess (``python -m hloref.fuzz.corpus lower DIR NAME...``),
  and the texts are cached under ``$XDG_CACHE_HOME/hloref/corpus/jax-VERSION/``;
  ``--realistic`` picks a subset (``default``: ``DEFAULT_REALISTIC``, small programs
  of mainstream types; ``all``; ``none``; or names separated by commas);
* ``examples/*.hlo``;
* ``--corpus DIR``: HLO text files (``*.hlo``, ``*.txt``), or an ``--xla_dump_to``
  directory (its ``*.before_optimizations.txt`` modules), or a directory of XLA test
  modules fetched by a script.

Every seed is parsed and verified by hloref; what does not verify, is larger than
``max_instructions`` or uses element types outside ``--types`` is left out, counted
in ``Corpus.skipped`` with the reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass, field

import hloref
from hloref.errors import HloError


__all__ = ["Seed", "Corpus", "load_corpus", "realistic_names", "lower_realistic",
           "DEFAULT_REALISTIC",
           "repository_root", "cache_dir", "element_types_of"]


@dataclass
class Seed:
    """A seed program: its name (where it came from) and its HLO text."""

    name: str
    text: str
    #: how often the campaign picks it relative to the others
    weight: float = 1.0


#: realistic programs of mainstream types and at most about 200 instructions
DEFAULT_REALISTIC = (
    "attention_fwd", "layer_norm", "log_softmax", "batch_norm_training", "rk4_lorenz",
    "cumulative_ops", "f16_attention", "pooling_grad", "segment_sum_grad", "welford_stats",
    "topk_ranking", "bf16_transformer_block", "kmeans", "bf16_cnn_fwd", "scatter_max_min",
    "assoc_scan_linear_rnn", "f16_classifier_loss", "bf16_softmax_large",
    "f16_masked_logsumexp", "bf16_gelu_mlp", "integer_arith", "moe_routing", "beam_search",
    "int8_quantized_linear",
)

_SHAPE_TYPE = re.compile(r"\b(pred|[suf]\d+|bf16|f8e\w+|f4e\w+|c64|c128|token)\[")


@dataclass
class Corpus:
    seeds: list = field(default_factory=list)
    #: source -> reason it was left out
    skipped: dict = field(default_factory=dict)

    def names(self) -> list[str]:
        return [s.name for s in self.seeds]


def repository_root() -> str:
    """The checkout this package runs from (``fuzz/`` is ``hloref.fuzz``)."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cache_dir() -> str:
    try:
        import jax
        version = jax.__version__
    except ImportError:
        version = "none"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "hloref", "corpus", f"jax-{version}")


def element_types_of(text: str) -> set[str]:
    """Element type names written in shapes of an HLO text."""
    return set(_SHAPE_TYPE.findall(text)) - {"token"}


def realistic_names(spec: str) -> list[str]:
    """``default``/``all``/``none``/``a,b,c`` → program names (``all`` needs the
    checkout's ``tests/``)."""
    spec = (spec or "none").strip()
    if spec == "none":
        return []
    if spec == "default":
        return list(DEFAULT_REALISTIC)
    if spec == "all":
        tests = os.path.join(repository_root(), "tests")
        sys.path.insert(0, tests)
        try:
            import realistic_programs
        finally:
            sys.path.remove(tests)
        return [n for n in realistic_programs.PROGRAMS if n != "transformer_train_large"]
    return [n.strip() for n in spec.split(",") if n.strip()]


def lower_realistic(names, *, directory: str | None = None, timeout: float = 900.0) -> dict:
    """name -> HLO text of the realistic programs ``names``, lowered in a subprocess
    (cached); a program that fails to lower is missing from the result."""
    directory = directory or cache_dir()
    os.makedirs(directory, exist_ok=True)
    missing = [n for n in names if not os.path.exists(os.path.join(directory, f"{n}.hlo"))]
    if missing and os.path.isdir(os.path.join(repository_root(), "tests")):
        try:
            subprocess.run([sys.executable, "-m", "hloref.fuzz.corpus", "lower", directory,
                            *missing], timeout=timeout, check=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        except subprocess.TimeoutExpired:
            pass
    out = {}
    for n in names:
        path = os.path.join(directory, f"{n}.hlo")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out[n] = f.read()
    return out


def _hlo_files(directory: str) -> list[str]:
    names = sorted(os.listdir(directory))
    dump = [n for n in names if n.endswith(".before_optimizations.txt")]
    if dump:
        return [os.path.join(directory, n) for n in dump]
    return [os.path.join(directory, n) for n in names
            if n.endswith((".hlo", ".txt")) and os.path.isfile(os.path.join(directory, n))]


def load_corpus(*, realistic: str = "default", examples: bool = True, dirs=(),
                types=None, max_instructions: int = 250) -> Corpus:
    """The seeds of a campaign (see the module docstring)."""
    corpus = Corpus()
    texts: list[tuple[str, str]] = []
    names = realistic_names(realistic)
    lowered = lower_realistic(names) if names else {}
    for n in names:
        if n in lowered:
            texts.append((f"realistic:{n}", lowered[n]))
        else:
            corpus.skipped[f"realistic:{n}"] = "could not be lowered (no tests/ checkout?)"
    files = []
    if examples:
        ex = os.path.join(repository_root(), "examples")
        if os.path.isdir(ex):
            files += [os.path.join(ex, n) for n in sorted(os.listdir(ex)) if n.endswith(".hlo")]
    for d in dirs:
        if not os.path.isdir(d):
            raise FileNotFoundError(f"--corpus {d}: not a directory")
        files += _hlo_files(d)
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as f:
            texts.append((os.path.relpath(path), f.read()))
    allowed = set(types) if types else None
    for name, text in texts:
        try:
            module = hloref.parse(text, filename=name, verify=True)
        except HloError as exc:
            corpus.skipped[name] = f"does not verify: {str(exc).splitlines()[0][:120]}"
            continue
        size = sum(len(c.instructions) for c in module.computations.values())
        if size > max_instructions:
            corpus.skipped[name] = f"{size} instructions (more than {max_instructions})"
            continue
        if allowed is not None and not element_types_of(text) <= allowed:
            corpus.skipped[name] = ("uses " + ", ".join(sorted(element_types_of(text) - allowed))
                                    + " (outside --types)")
            continue
        corpus.seeds.append(Seed(name, module.to_text()))
    return corpus


def _lower_main(directory: str, names) -> int:
    sys.path.insert(0, os.path.join(repository_root(), "tests"))
    import realistic_programs
    bad = 0
    for n in names:
        try:
            text = realistic_programs.PROGRAMS[n]().lower().as_text(dialect="hlo")
        except Exception as exc:  # noqa: BLE001 - one program's failure is reported, not fatal
            print(f"{n}: {type(exc).__name__}: {exc}", file=sys.stderr)
            bad += 1
            continue
        tmp = os.path.join(directory, f".{n}.hlo.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, os.path.join(directory, f"{n}.hlo"))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "lower":
        raise SystemExit(_lower_main(sys.argv[2], sys.argv[3:]))
    raise SystemExit("usage: python -m hloref.fuzz.corpus lower DIR NAME...")
