"""The ``hloref fuzz`` options of mutation campaigns, pass coverage, target passes and
type profiles (``fuzz/reach.py``, ``fuzz/type_profiles.py``): their arguments and
their reading into ``CampaignOptions`` fields."""

from __future__ import annotations

from hloref.cli_common import CliError

__all__ = ["add_reach_arguments", "reach_options"]


def add_reach_arguments(f) -> None:
    f.add_argument("--types", metavar="PROFILE|T1,T2",
                   help="element types of the programs: mainstream (f32, bf16, f16, s32, "
                        "pred), all (default), or a comma-separated list")
    f.add_argument("--mutate", action="store_true",
                   help="programs are mutants of real programs (the seed corpus: "
                        "tests/realistic_programs.py lowered at the start, examples/, --corpus)")
    f.add_argument("--corpus", action="append", default=[], metavar="DIR",
                   help="more seeds: HLO text files or an --xla_dump_to directory "
                        "(repeatable; implies --mutate)")
    f.add_argument("--realistic", default="default",
                   help="realistic JAX programs among the seeds: default (small mainstream "
                        "ones), all, none, or names separated by commas")
    f.add_argument("--mix", type=float, default=0.5,
                   help="with --mutate: share of generated programs among the mutants (0-1, "
                        "default 0.5)")
    f.add_argument("--pass-coverage", type=int, default=None, metavar="N",
                   help="compile one program in every N again with XLA's per-pass dump and "
                        "count the (pass, opcode) pairs reached (default: 4 with --mutate or "
                        "--target-pass, else off)")
    f.add_argument("--target-pass", metavar="NAME",
                   help="aim at one of XLA's passes (e.g. algsimp): mutations that make the "
                        "patterns it rewrites are preferred (implies --mutate)")
    f.add_argument("--max-mutations", type=int, default=4, help="mutations per mutant (max)")
    f.add_argument("--max-seed-instructions", type=int, default=150,
                   help="seeds (and mutants kept as seeds) have at most this many instructions")
    f.add_argument("--cut-seeds", type=int, default=16, metavar="N",
                   help="seeds larger than N instructions are replaced by cuts of them (a "
                        "value and what it needs, at most N instructions; default 16); 0: "
                        "no cuts, seeds above --max-seed-instructions are left out")


def reach_options(args, ops):
    """``(element types, ops, ReachOptions or None)`` from the parsed arguments."""
    from .pass_patterns import UnknownPassError, mutation_weights
    from .reach import ReachOptions
    from .type_profiles import TypesError, ops_for_types, parse_types
    try:
        types = parse_types(args.types)
    except TypesError as exc:
        raise CliError(str(exc)) from None
    ops = ops_for_types(ops, types)
    if args.target_pass:
        try:
            mutation_weights(args.target_pass)
        except UnknownPassError as exc:
            raise CliError(str(exc)) from None
    mutate = bool(args.mutate or args.corpus or args.target_pass)
    if not 0.0 <= args.mix <= 1.0:
        raise CliError("--mix must be between 0 and 1")
    if args.pass_coverage is not None and args.pass_coverage < 0:
        raise CliError("--pass-coverage must be >= 0")
    probe = args.pass_coverage if args.pass_coverage is not None else (4 if mutate else 0)
    if not mutate and not probe:
        return types, ops, None
    if getattr(args, "ray", None):
        raise CliError("--mutate, --corpus, --target-pass and --pass-coverage do not run "
                       "with --ray yet")
    if probe and args.oracle == "tf":
        raise CliError("--pass-coverage needs the xla oracle")
    if args.max_mutations < 0:
        raise CliError("--max-mutations must be >= 0")
    if args.max_seed_instructions < 1:
        raise CliError("--max-seed-instructions must be >= 1")
    if args.cut_seeds < 0:
        raise CliError("--cut-seeds must be >= 0")
    return types, ops, ReachOptions(mutate=mutate, corpus=tuple(args.corpus),
                                    realistic=args.realistic, mix=args.mix, probe_every=probe,
                                    target_pass=args.target_pass,
                                    max_mutations=args.max_mutations,
                                    max_seed_instructions=args.max_seed_instructions,
                                    cut_instructions=args.cut_seeds)
