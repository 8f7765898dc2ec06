"""From a failing program to a filed finding: reduce, keep to the contract, attribute,
deduplicate by root cause, write (``docs/triage.md``).

``reduce_and_write`` is what ``hloref diff --reduce``, campaigns and the Ray driver's
actors call; it uses ``findings`` (storage and keys), ``contract`` (XLA's contract),
``filing`` (stage attribution, root keys, the maintainer's report) and ``archive``
(the findings reported upstream already).
"""

from __future__ import annotations

import json
import os

from .findings import finding_dirs, module_types, signature, signature_key, write_pending
from .report import markdown_report, write_finding

__all__ = ["reduce_and_write", "contract_variant", "write_outside_contract", "same_root",
           "add_variant"]


def reduce_and_write(module, values, report, worker, out_dir: str, *, oracle: str = "xla",
                     seed=None, blame: bool = True, extra_meta: dict | None = None,
                     still_fails=None, write_report: bool = True) -> tuple[str, dict, bool]:
    """Reduce a failing program, attribute it to a stage of XLA's chain, write the finding.

    On the way: a failure whose inputs leave XLA's contract is replaced by its in-contract
    variant, or kept under ``OUT/outside-contract/`` and not filed; a finding with the
    root key of a known-upstream one (``archive.known_root_keys``) returns
    ``"known-upstream:<thread>"``, of any other stored finding ``"archived:<directory>"``
    (``archive.archived_root_keys``); one with the root key of a finding already in
    ``out_dir`` is added to that finding's ``variants``.

    The shared form of ``hloref diff --reduce``: returns ``(directory, signature,
    new)``; ``new`` is False when a finding with the same signature exists (its
    directory is returned and nothing is written). ``still_fails(report)`` may veto a
    reduction step (default: the same verdict, blamed on the same opcode);
    ``write_report=False`` skips the maintainer's report (``filing.refresh``: it runs the
    reproducers)."""
    from .differential import diff
    from .reduce import reduce_failure

    want = report.culprit.innermost().opcode if report.culprit else None

    def fails(m, a) -> bool:
        r = diff(m, a, oracle=oracle, worker=worker)
        if r.verdict != report.verdict:
            return False
        if still_fails is not None and not still_fails(r):
            return False
        return want is None or (r.culprit is not None and r.culprit.innermost().opcode == want)

    try:
        small, small_args = reduce_failure(module, values, fails)
    except Exception:  # noqa: BLE001 - keep the unreduced program rather than lose it
        import hloref
        small, small_args = hloref.parse(module.to_text()), list(values)
    final = diff(small, small_args, oracle=oracle, worker=worker)
    if final.verdict != report.verdict:  # reduction lost it (flaky oracle): keep the original
        import hloref
        small, small_args = hloref.parse(module.to_text()), list(values)
        final = diff(small, small_args, oracle=oracle, worker=worker)
    text = small.to_text()
    culprit = final.culprit.innermost() if final.culprit else None
    # the contract binds values XLA computes at run time; a crash of the compiler is a
    # bug whatever the values (a compiler must not trap on undefined run-time behaviour)
    outside = contract_variant(small, small_args, fails) if final.verdict == "mismatch" else None
    if outside is not None:
        if outside["variant"] is None:  # the fault needs undefined behaviour: not filed
            return write_outside_contract(out_dir, small, small_args, final, outside), \
                signature(small, final.verdict, None), False
        small, small_args = outside["variant"]
        text = small.to_text()
        final = diff(small, small_args, oracle=oracle, worker=worker)
    attribution = None
    if blame and final.verdict in ("mismatch", "crash"):
        from .filing import attribute_finding
        try:
            attribution = attribute_finding(text, small_args, final.verdict, oracle,
                                            final.debug_options, worker)
        except Exception as exc:  # noqa: BLE001 - attribution is evidence, not a gate
            attribution = {"stage": None, "component": "undetermined", "steps": [
                ["attribution", f"failed: {type(exc).__name__}: {exc}"]]}
    blamed = attribution.get("pass") if attribution and attribution.get("stage") == "hlo-pass" \
        else None
    confirmed = attribution.get("confirmed") if blamed else None
    sig = signature(small, final.verdict, blamed)
    key = signature_key(sig)
    from .filing import root_key
    rkey = root_key(attribution, small, culprit.opcode if culprit else None)
    variant = {"element_types": module_types(small), "seed": seed,
               "instructions": len(small.entry.instructions)}
    from .archive import archived_root_keys, known_root_keys
    known = known_root_keys().get(rkey)
    if known is not None:  # reported or fixed upstream already: counted, not filed
        return f"known-upstream:{known}", sig, False
    archived = archived_root_keys().get(rkey)
    if archived is not None:  # in the archive already (ours, not yet upstream): counted
        return f"archived:{archived}", sig, False
    same = same_root(out_dir, rkey)
    if same is not None:
        add_variant(same, variant)
        return same, sig, False
    name = f"{final.verdict}-{culprit.opcode if culprit else 'module'}-{key}"
    path = os.path.join(out_dir, name)
    if os.path.exists(path):
        return path, sig, False
    title = (f"XLA:CPU {final.verdict} in `{culprit.opcode}`" if culprit
             else f"{oracle} {final.verdict} on a {len(small.entry.instructions)}-instruction module")
    md = markdown_report(title=title, verdict=final.verdict, module_text=text, inputs=small_args,
                         expected=final.expected, actual=final.actual, summary=final.summary(),
                         blamed_pass=blamed, blame_confirmed=confirmed, seed=seed, oracle=oracle,
                         debug_options=final.debug_options)
    meta = {"verdict": final.verdict, "oracle": oracle, "seed": seed,
            "debug_options": final.debug_options,
            "culprit": culprit and {"opcode": culprit.opcode, "instruction": culprit.name},
            "blamed_pass": blamed, "blame_confirmed": confirmed,
            "instructions": len(small.entry.instructions), "signature": sig,
            "signature_key": key, "root_key": rkey, "attribution": attribution,
            "contract": outside and {"breaches": outside["breaches"],
                                     "note": "reduced to the in-contract variant"},
            "message": final.message, **(extra_meta or {})}
    write_finding(path, module_text=text, inputs=small_args, expected=final.expected,
                  actual=final.actual, report_md=md, meta=meta)
    if blame and write_report:
        from .filing import refresh
        try:  # the maintainer's report: reproducers run once, report.md rewritten
            refresh(path, worker=worker, attribution=False)
        except Exception:  # noqa: BLE001 - the finding is written; its report stays plain
            pass
    return path, sig, True


def contract_variant(module, args, fails) -> dict | None:
    """Where the failing inputs leave XLA's contract (``fuzz/contract.py``): the breaches,
    and the in-contract variant (signed integers made unsigned) when it still fails."""
    from .contract import contract_breaches, unsigned_arguments, unsigned_variant
    try:
        breaches = contract_breaches(module, args)
    except Exception:  # noqa: BLE001 - a checker failure must not lose the finding
        return None
    if not breaches:
        return None
    found = None
    vmodule = unsigned_variant(module)
    if vmodule is not None:
        vargs = unsigned_arguments(list(args))
        try:
            if fails(vmodule, vargs) and not contract_breaches(vmodule, vargs):
                found = (vmodule, vargs)
        except Exception:  # noqa: BLE001
            found = None
    return {"breaches": [str(b) for b in breaches], "variant": found}


def write_outside_contract(out_dir: str, module, args, report, outside: dict) -> str:
    """A failure that needs undefined behaviour: kept for reading, never filed."""
    key = signature_key(signature(module, report.verdict, None))
    meta = {"verdict": report.verdict, "why": "the inputs leave XLA's contract and no "
            "in-contract variant fails", "breaches": outside["breaches"]}
    return write_pending(os.path.join(out_dir, "outside-contract"), key, module, args, meta)


def same_root(out_dir: str, rkey: str) -> str | None:
    """The finding in ``out_dir`` with root key ``rkey``, if any."""
    for name in finding_dirs(out_dir):
        try:
            with open(os.path.join(out_dir, name, "finding.json"), encoding="utf-8") as f:
                if json.load(f).get("root_key") == rkey:
                    return os.path.join(out_dir, name)
        except (OSError, ValueError):
            continue
    return None


def add_variant(path: str, variant: dict) -> None:
    """Record another program with the same root cause in its finding."""
    meta_path = os.path.join(path, "finding.json")
    with open(meta_path, encoding="utf-8") as f:
        meta = json.load(f)
    meta.setdefault("variants", []).append(variant)
    tmp = meta_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(meta, f, indent=2, default=str)
    os.replace(tmp, meta_path)
