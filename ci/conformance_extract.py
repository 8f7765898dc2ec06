"""Extraction of XLA's HLO test modules (ci/conformance.py): every C++ raw string literal
of ``xla/**/*_test.cc`` that contains ``ENTRY`` is one module (``literals_of``), read from
a bare git directory, a checkout or a directory of ``.hlo`` files (``extract``); identical
texts are one ``Case``. ``parse_or_none``: hloref's module of a text, or None."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass, field

#: A C++ raw string literal: R"delim( ... )delim".
RAW_STRING_RE = re.compile(r'R"([^()\s\\"]{0,16})\((.*?)\)\1"', re.S)
TEST_FILE_RE = re.compile(r"^xla/.*_test\.cc$")


@dataclass
class Case:
    key: str            # sha256 of the text, 16 hex digits
    text: str
    locations: list = field(default_factory=list)  # "path:line"

    @property
    def where(self) -> str:
        return self.locations[0] if self.locations else self.key


# ----------------------------------------------------------------------------------------
# Extraction
# ----------------------------------------------------------------------------------------

def literals_of(source: str):
    """(line, text) of every raw string literal containing ``ENTRY``."""
    for m in RAW_STRING_RE.finditer(source):
        body = m.group(2)
        if "ENTRY" in body:
            yield source.count("\n", 0, m.start()) + 1, body


def _git_files(git_dir: str, ref: str):
    names = subprocess.run(["git", f"--git-dir={git_dir}", "ls-tree", "-r", "--name-only", ref],
                           check=True, capture_output=True, text=True).stdout.split()
    names = sorted(n for n in names if TEST_FILE_RE.match(n))
    # One `git cat-file --batch` for all files.
    proc = subprocess.Popen(["git", f"--git-dir={git_dir}", "cat-file", "--batch"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        for n in names:
            proc.stdin.write(f"{ref}:{n}\n".encode())
            proc.stdin.flush()
            header = proc.stdout.readline().split()
            if len(header) < 3:
                continue
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            yield n, data.decode("utf-8", "replace")
    finally:
        proc.stdin.close()
        proc.wait()


def extract(source: str, ref: str = "main") -> list[Case]:
    """Every distinct module text of ``source`` (git dir, checkout, or .hlo directory)."""
    cases: dict[str, Case] = {}

    def add(text: str, where: str):
        key = hashlib.sha256(text.encode()).hexdigest()[:16]
        case = cases.get(key)
        if case is None:
            case = cases[key] = Case(key, text)
        case.locations.append(where)

    if os.path.isfile(os.path.join(source, "HEAD")) and os.path.isdir(os.path.join(source, "objects")):
        files = _git_files(source, ref)
    elif os.path.isdir(os.path.join(source, "xla")):
        def walk():
            for root, _, names in os.walk(os.path.join(source, "xla")):
                for n in sorted(names):
                    path = os.path.relpath(os.path.join(root, n), source)
                    if TEST_FILE_RE.match(path):
                        with open(os.path.join(source, path), encoding="utf-8", errors="replace") as f:
                            yield path, f.read()
        files = walk()
    else:
        for n in sorted(os.listdir(source)):
            if n.endswith(".hlo"):
                with open(os.path.join(source, n), encoding="utf-8") as f:
                    add(f.read(), n)
        return list(cases.values())
    for path, text in files:
        for line, body in literals_of(text):
            add(body, f"{path}:{line}")
    return list(cases.values())


def parse_or_none(text: str):
    import hloref
    try:
        return hloref.parse(text)
    except Exception:
        return None
