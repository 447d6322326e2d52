"""The ``battus`` command line.

Every command reads its inputs fully, computes, then writes each output
atomically; any bad input ends with one line ``battus: error: FILE: FIELD:
message`` on stderr and exit status 2, leaving no output file behind.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import warnings
from pathlib import Path

from . import __version__
from .baselines import BASELINES  # names only: the module loads numpy alone
from .errors import InputError, printable

EXIT_BAD_INPUT = 2


def _rate(text: str) -> float:
    """A rate or threshold: a finite number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0.0 <= value <= 1.0):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {text!r}")
    return value


def _integer(minimum: int, maximum: int | None = None):
    """argparse type: an integer in [minimum, maximum], named in the error by argparse."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f" and <= {maximum}"
            raise argparse.ArgumentTypeError(f"must be >= {minimum}{upper}, got {text}")
        return value

    return parse


def _threshold(text: str) -> float:
    value = _rate(text)
    if value == 0.0:
        raise argparse.ArgumentTypeError("must lie in (0, 1], got 0")
    return value


def _seconds(text: str) -> float:
    """A time budget: a finite number of seconds, >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not (0.0 <= value < float("inf")):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def _devices(text: str) -> list[int]:
    """CUDA device ordinals: comma-separated distinct integers >= 0, such as '0,1'."""
    devices: list[int] = []
    for item in text.split(","):
        try:
            device = int(item)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not comma-separated device numbers such as 0,1: {text!r}") from None
        if device < 0:
            raise argparse.ArgumentTypeError(f"device numbers must be >= 0, got {item.strip()}")
        if device in devices:
            raise argparse.ArgumentTypeError(f"device {device} is listed twice in {text!r}")
        devices.append(device)
    return devices


_SEED = _integer(0, 2**64 - 1)  # seeds key a 64-bit counter-based generator


def _say(quiet: bool):
    def emit(message: str) -> None:
        if not quiet:
            print(f"battus: {printable(message)}", file=sys.stderr, flush=True)

    return emit


def _add_schedule(p: argparse.ArgumentParser, default: str | None = "benchmark") -> None:
    p.add_argument(
        "--schedule", default=default,
        help="observed frames: 'benchmark' = {floor(T/2), T} (HERMES protocol), 'final' = {T} "
             "(DITTO), 'all', 'every:K', or an explicit list '3,7,10'"
             + (f" (default: {default})" if default else " (default: the file's own observations)"),
    )


def _source_url(args: argparse.Namespace) -> dict:
    """``source_url`` for the provenance record when the input is a download (``--source-url``)."""
    return {"source_url": args.source_url} if args.source_url else {}


def cmd_import_hermes(args: argparse.Namespace) -> None:
    from .hermes import canonical_from_pt, pol_from_retweets
    from .io import provenance, sha256_file, write_history

    src = Path(args.input)
    if src.suffix == ".txt":
        canon = pol_from_retweets(src, T=args.pol_T)
    else:
        canon = canonical_from_pt(src, name=args.name)
    if args.name:
        canon.name = args.name
    problem = canon.to_problem(args.schedule).validate(str(src))
    prov = provenance(stage="import-hermes", source=str(src), source_sha256=sha256_file(src),
                      schedule=problem.observations.times.tolist(), **_source_url(args))
    write_history(args.out, problem, prov)
    _say(args.quiet)(f"{canon.name}: n={canon.graph.n} |E|={canon.graph.num_edges} T={canon.T} "
                     f"n0={canon.n0} model={canon.model} -> {args.out}")


def cmd_graph(args: argparse.Namespace) -> None:
    from .edgelist import read_edgelist
    from .io import provenance, sha256_file, write_graph

    graph = read_edgelist(args.input, directed=args.directed, fmt=args.format,
                          keep_largest_component=not args.keep_all_components, name=args.name)
    loops, duplicates = graph.meta["self_loops_dropped"], graph.meta["duplicates_dropped"]
    if loops or duplicates:  # a warning, shown even with --quiet: the graph differs from the file
        print(f"battus: warning: {printable(args.input)}: dropped {loops} self-loops and {duplicates} duplicate edges",
              file=sys.stderr, flush=True)
    prov = provenance(stage="graph", source=str(args.input), source_sha256=sha256_file(args.input),
                      directed=args.directed, largest_component=not args.keep_all_components,
                      counts=graph.meta, **_source_url(args))
    write_graph(args.out, graph, prov)
    _say(args.quiet)(f"n={graph.n} arcs={graph.m} |E|={graph.num_edges} -> {args.out}")


def cmd_simulate(args: argparse.Namespace) -> None:
    from .io import provenance, read_graph, sha256_file, write_history
    from .memory import require, simulate_bytes
    from .problem import Problem, observe, schedule_times
    from .simulate import simulate

    graph = read_graph(args.graph)
    if args.n0 > graph.n:
        raise InputError("--n0", "n0", f"{args.n0} initial infections on a graph of {graph.n} vertices")
    require(simulate_bytes(graph.n, graph.m, args.T), "--T", "T",
            f"T={args.T} frames of {graph.n} vertices")
    times = schedule_times(args.T, args.schedule)
    kwargs = {"backend": args.backend} if args.backend != "cpu" else {}
    truth = simulate(graph, args.model, args.T, args.n0, args.beta_i, args.beta_r, seed=args.seed,
                     same_step_recovery=args.same_step_recovery, **kwargs)
    problem = Problem(graph=graph, model=args.model, T=args.T, n0=args.n0,
                      observations=observe(truth, times), truth=truth,
                      name=args.name or Path(args.out).stem)
    prov = provenance(stage="simulate", graph=str(args.graph), graph_sha256=sha256_file(args.graph),
                      model=args.model, T=args.T, n0=args.n0, beta_i=args.beta_i, beta_r=args.beta_r,
                      seed=args.seed, backend=args.backend, same_step_recovery=args.same_step_recovery,
                      schedule=times.tolist())
    write_history(args.out, problem, prov)
    final = truth[-1]
    _say(args.quiet)(f"simulated {args.model.upper()} on n={graph.n}: final S/I/R = "
                     f"{(final == 0).sum()}/{(final == 1).sum()}/{(final == 2).sum()} -> {args.out}")


def options_from_args(args: argparse.Namespace):
    from .options import FitSettings, method_options

    fit_settings = FitSettings(
        grid_points=args.grid_points, refine_points=args.refine_points,
        refine_rounds=args.refine_rounds, lower=args.rate_lower, upper=args.rate_upper,
        chunk=args.candidate_chunk,
    )
    try:
        return method_options(
            args.method, decoder=args.decoder, tau=args.tau, beta_i=args.beta_i, beta_r=args.beta_r,
            fit=args.fit, reset=args.reset, backward=args.backward, projection=args.projection,
            causal=args.causal, fit_settings=fit_settings,
        )
    except InputError as exc:  # name the option the user typed, not the Options field
        raise InputError(_OPTION_OF_FIELD.get(exc.field, exc.source), exc.field, exc.message) from None


_OPTION_OF_FIELD = {
    "tau": "--tau", "beta_i": "--beta-i", "beta_r": "--beta-r", "decoder": "--decoder", "method": "--method",
    "fit bounds": "--rate-lower/--rate-upper",
    "fit grid": "--grid-points/--refine-points/--refine-rounds/--candidate-chunk",
}


def _observed(problem, args: argparse.Namespace):
    """The problem as observed under --schedule (a protocol): its truth re-observed at those frames."""
    from .problem import observe, schedule_times

    if args.schedule is not None:
        if problem.truth is None:
            raise InputError(args.history, "truth", "--schedule re-observes the truth, which this file lacks")
        problem.observations = observe(problem.truth, schedule_times(problem.T, args.schedule))
    return problem


def _truth_for(args: argparse.Namespace) -> str:
    """A method never reads the truth: only --schedule does, to re-observe it."""
    return "skip" if args.schedule is None else "optional"


def cmd_reconstruct(args: argparse.Namespace) -> None:
    import concurrent.futures

    from .io import read_history, sha256_file, write_prediction
    from .memory import reconstruct_bytes, require
    from .pipeline import reconstruct

    # the input's sha256 (for the prediction's provenance) is computed while the GPU or the CPU works
    digest = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    input_sha256 = digest.submit(sha256_file, args.history)
    problem = _observed(read_history(args.history, truth=_truth_for(args)), args)
    options = options_from_args(args)
    require(reconstruct_bytes(problem.n, problem.graph.m, problem.T, keep_posteriors=args.posteriors,
                              causal=options.causal, fit_chunk=options.fit_settings.chunk if options.fit else 0),
            args.history, "T", f"T={problem.T} frames of {problem.n} vertices")
    say = _say(args.quiet)
    say(f"{options.method} on {problem.name or args.history}: n={problem.n} arcs={problem.graph.m} "
        f"T={problem.T} observed={problem.observations.times.tolist()}")
    recon = reconstruct(problem, options, backend=args.backend, keep_posteriors=args.posteriors, progress=say,
                        repeats=args.repeats, repeat_seconds=args.repeat_seconds, devices=args.devices)
    write_prediction(args.out, recon, problem, args.history,
                     extra={"observed_times": problem.observations.times.tolist()},
                     input_sha256=input_sha256.result())
    digest.shutdown()
    runs = recon.extras.get("algorithm_seconds_runs", [recon.algorithm_seconds])
    timed = f"median of {len(runs)} runs " if len(runs) > 1 else ""
    say(f"done in {timed}{recon.algorithm_seconds * 1e3:.1f} ms on {recon.backend} ({recon.device}); "
        f"rates=({recon.beta_i:.4g}, {recon.beta_r:.4g}) -> {args.out}")


def cmd_baseline(args: argparse.Namespace) -> None:
    from .baselines import baseline
    from .io import read_history, write_prediction
    from .memory import history_bytes, require

    problem = _observed(read_history(args.history, truth="required" if args.method == "truth" else _truth_for(args)),
                        args)
    require(3 * history_bytes(problem.n, problem.T), args.history, "T", f"T={problem.T} frames of {problem.n} vertices")
    recon = baseline(problem, args.method, seed=args.seed)
    write_prediction(args.out, recon, problem, args.history,
                     extra={"observed_times": problem.observations.times.tolist()})
    _say(args.quiet)(f"{args.method} on {problem.name or args.history} in {recon.algorithm_seconds * 1e3:.1f} ms "
                     f"-> {args.out}")


def cmd_run_method(args: argparse.Namespace) -> None:
    import shlex

    from .io import read_history, write_prediction
    from .plugins import run_method

    try:
        argv = shlex.split(args.command)
    except ValueError as exc:
        raise InputError("--command", "command", str(exc)) from None
    problem = _observed(read_history(args.history, truth=_truth_for(args)), args)
    # --quiet: the plug-in's output is kept and shown only if it fails, not streamed
    recon = run_method(args.name, argv, problem, threads=args.threads, seed=args.seed,
                       progress=None if args.quiet else _say(False), time_limit=args.time_limit)
    write_prediction(args.out, recon, problem, args.history,
                     extra={"observed_times": problem.observations.times.tolist()})
    _say(args.quiet)(f"method {args.name} on {problem.name or args.history} in {recon.algorithm_seconds * 1e3:.1f} ms "
                     f"({recon.extras['plugin_timing']}) -> {args.out}")


def cmd_score(args: argparse.Namespace) -> None:
    from .io import atomic_path, read_history, read_prediction, sha256_file
    from .score import score_prediction

    problem = read_history(args.history, truth="required")
    prediction = read_prediction(args.prediction, model=problem.model)
    made_from = prediction["provenance"].get("input_sha256")
    if isinstance(made_from, str) and not args.allow_other_history and made_from != sha256_file(args.history):
        raise InputError(args.prediction, "@provenance/input_sha256",
                         f"made from another history (sha256 {made_from[:12]}...), not {args.history}; "
                         "--allow-other-history scores it anyway")
    result = {**score_prediction(problem, prediction, str(args.prediction)),
              "prediction": str(args.prediction), "history": str(args.history)}
    text = json.dumps(result, indent=2, default=_json_default)
    if not args.out:
        print(text)
        return
    with atomic_path(args.out) as tmp:
        tmp.write_text(text + "\n")
    _say(args.quiet)(score_summary(result) + f" -> {args.out}")


def score_summary(result: dict) -> str:
    """One line of a score record: what `battus score --out` prints instead of the whole JSON."""

    def number(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.4f}"

    hermes, unobserved, causal = result["hermes"], result["unobserved"], result["causal"]["prediction"]
    return (f"{printable(str(result['dataset']))}: F1 {number(hermes['f1'])} NRMSE {number(hermes['nrmse'])}; "
            f"unobserved F1 {number(unobserved['f1'])} NRMSE {number(unobserved['nrmse'])}; "
            f"causal violations {causal['violations']}/{causal['events']}")


def _json_default(obj):
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    raise TypeError(type(obj).__name__)


def cmd_info(args: argparse.Namespace) -> None:
    import h5py

    from .io import H5_ERRORS, describe_attr, open_hdf5, unreadable

    path = Path(args.file)
    lines: list[str] = []
    with open_hdf5(path) as fh:
        try:
            lines.append(f"{path}: {describe_attr(fh, 'format')} v{describe_attr(fh, 'format_version')}")
            for key in sorted(fh.attrs.keys()):
                if key not in ("format", "format_version"):
                    text = describe_attr(fh, key)
                    lines.append(f"  @{key} = {text if len(text) < 200 else text[:197] + '...'}")

            def show(name, obj):
                if isinstance(obj, h5py.Dataset):
                    lines.append(f"  /{name}: {obj.dtype} {obj.shape}")

            fh.visititems(show)  # hard links only: soft and external links are not followed
        except H5_ERRORS as exc:  # the same conversion as the readers'
            raise unreadable(path, "file", exc) from None
    print("\n".join(printable(line) for line in lines))  # names and values come from the file


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error (usage stays available through --help)."""

    def error(self, message: str):
        self.exit(EXIT_BAD_INPUT, f"{self.prog}: error: {printable(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="battus",
        description="Diffusion history reconstruction: infer every vertex's SI/SIR state at every "
                    "frame from a graph and a few snapshots.",
    )
    parser.add_argument("--version", action="version", version=f"battus {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)

    def common(p):
        p.add_argument("--quiet", action="store_true", help="no progress messages on stderr")

    def source_url(p):
        p.add_argument("--source-url", metavar="URL",
                       help="the address the input was downloaded from, recorded in the output's provenance")

    p = sub.add_parser("import-hermes", help="import a DITTO/HERMES .pt export (or Pol's rt-pol.txt)",
                       description="Import one canonical benchmark history (torch-free, restricted "
                                   "unpickler) into a Battus history file with truth and observations.")
    p.add_argument("input", help="a .pt export, or pol/rt-pol.txt to rebuild Pol-SI")
    p.add_argument("--out", required=True, help="history file to write (.h5)")
    p.add_argument("--name", help="dataset name stored in the file (default: file stem)")
    p.add_argument("--pol-T", dest="pol_T", type=_integer(1), default=40, help="horizon for Pol-SI (default: 40)")
    _add_schedule(p)
    source_url(p)
    common(p)
    p.set_defaults(func=cmd_import_hermes, inputs=("input",))

    p = sub.add_parser("graph", help="edge list -> graph file",
                       description="Read a SNAP edge list (.txt/.txt.gz) or CSV, drop self-loops and "
                                   "duplicates, symmetrize undirected input, keep the largest weakly "
                                   "connected component, and write an in-neighbour CSR graph file.")
    p.add_argument("input", help="edge list (.txt, .txt.gz, .csv)")
    p.add_argument("--out", required=True, help="graph file to write (.h5)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--directed", dest="directed", action="store_true", help="arcs are directed (u v = u->v)")
    g.add_argument("--undirected", dest="directed", action="store_false", help="edges are undirected")
    p.add_argument("--format", default="auto", choices=["auto", "snap", "csv"], help="input format")
    p.add_argument("--keep-all-components", action="store_true", help="do not restrict to the largest WCC")
    p.add_argument("--name", help="graph name stored in the file")
    source_url(p)
    common(p)
    p.set_defaults(func=cmd_graph, inputs=("input",))

    p = sub.add_parser("simulate", help="simulate an SI/SIR history on a graph file",
                       description="Synchronous discrete-time SI/SIR with exactly n0 uniform initial "
                                   "infections; bit-identical for a seed. By default a vertex infected in a "
                                   "step recovers at the earliest in the next step, as in the benchmark's "
                                   "histories; --same-step-recovery gives the paper's Eq. 2 kernel exactly.")
    p.add_argument("graph", help="graph file (from `battus graph`) or a history file")
    p.add_argument("--out", required=True, help="history file to write (.h5)")
    p.add_argument("--model", required=True, choices=["si", "sir"], help="diffusion model")
    p.add_argument("--T", type=_integer(1), default=40, help="number of steps (frames 0..T; default: 40)")
    p.add_argument("--n0", type=_integer(1), default=100, help="initially infected vertices (default: 100)")
    p.add_argument("--beta-i", type=_rate, default=0.1, help="infection rate per arc (default: 0.1)")
    p.add_argument("--beta-r", type=_rate, default=0.1, help="recovery rate, SIR only (default: 0.1)")
    p.add_argument("--seed", type=_SEED, default=123456789,
                   help="random seed, 0 <= seed < 2**64 (default: 123456789)")
    p.add_argument("--same-step-recovery", action="store_true",
                   help="let a vertex infected in a step recover in that same step, as the paper's "
                        "Eq. 2 kernel allows (default: off, as in the benchmark's histories)")
    p.add_argument("--backend", default="cpu", choices=["auto", "cpu", "cuda"], help="where to simulate")
    p.add_argument("--name", help="dataset name stored in the file")
    _add_schedule(p)
    common(p)
    p.set_defaults(func=cmd_simulate, inputs=("graph",))

    p = sub.add_parser("reconstruct", help="reconstruct a history with Battus or Battus-Z",
                       description="Infer the full history from the observed frames alone (the truth "
                                   "is never read). Presets: battus = fit, reset, forward-backward, "
                                   "MAP; battus-z = fixed rates (.1, .1), no reset, threshold .65. "
                                   "Every other option overrides the preset (an ablation).")
    p.add_argument("history", help="history file (needs graph, model, T, n0, observations)")
    p.add_argument("--out", required=True, help="prediction file to write (.h5)")
    p.add_argument("--method", required=True, choices=["battus", "battus-z"], help="method preset")
    p.add_argument("--decoder", choices=["threshold", "map"], help="decoder (preset: battus map, battus-z threshold)")
    p.add_argument("--tau", type=_threshold, help="threshold for the threshold decoder, in (0, 1] (default: 0.65)")
    p.add_argument("--beta-i", type=_rate, help="fixed infection rate in [0, 1] (default: 0.1; ignored with --fit)")
    p.add_argument("--beta-r", type=_rate, help="fixed recovery rate in [0, 1] (default: 0.1; SI uses 0)")
    p.add_argument("--fit", action=argparse.BooleanOptionalAction, default=None,
                   help="fit the rates by grid search on Eq. 4 (preset: battus yes, battus-z no)")
    p.add_argument("--reset", action=argparse.BooleanOptionalAction, default=None,
                   help="reset the mean field to each observed snapshot (preset: battus yes)")
    p.add_argument("--backward", action=argparse.BooleanOptionalAction, default=None,
                   help="run the backward pass (default: yes)")
    p.add_argument("--projection", action=argparse.BooleanOptionalAction, default=None,
                   help="project hitting times onto the observed frames (default: yes)")
    p.add_argument("--causal", action=argparse.BooleanOptionalAction, default=None,
                   help="graph-causal repair after decoding (Battus-C; default: no)")
    p.add_argument("--grid-points", type=_integer(2, 200), default=24,
                   help="fit: coarse grid points per rate (default: 24)")
    p.add_argument("--refine-points", type=_integer(2, 50), default=7,
                   help="fit: points per rate per refinement (default: 7)")
    p.add_argument("--refine-rounds", type=_integer(0, 20), default=4, help="fit: refinement rounds (default: 4)")
    p.add_argument("--rate-lower", type=_rate, default=1e-4, help="fit: lower rate bound (default: 1e-4)")
    p.add_argument("--rate-upper", type=_rate, default=0.5, help="fit: upper rate bound (default: 0.5)")
    p.add_argument("--candidate-chunk", type=_integer(1, 4096), default=64,
                   help="fit: candidates per batched pass (default: 64)")
    _add_schedule(p, default=None)
    p.add_argument("--backend", default="auto", choices=["auto", "cpu", "cuda"],
                   help="auto = CUDA when a GPU is present (default: auto)")
    p.add_argument("--devices", type=_devices, default=None, metavar="I,J,...",
                   help="CUDA devices of --backend cuda (or auto on a GPU), comma-separated ordinals such as "
                        "0,1: the fit (--fit) spreads each round over all of them (by frames between snapshots, else "
                        "by candidates) with the same result as one GPU; everything else runs on the first "
                        "(default: the current GPU)")
    p.add_argument("--posteriors", action="store_true", help="also store the posterior marginals (float32)")
    p.add_argument("--repeats", type=_integer(1, 100), default=1,
                   help="time the algorithm up to this many times after warm-up and record the median "
                        "(the history is the same every time; default: 1)")
    p.add_argument("--repeat-seconds", type=_seconds, default=60.0,
                   help="stop repeating once the runs have taken this long (default: 60)")
    common(p)
    p.set_defaults(func=cmd_reconstruct, inputs=("history",))

    p = sub.add_parser("baseline", help="write a control's or baseline's prediction",
                       description="The yardsticks scored beside every method: truth (positive control; "
                                   "the only one reading the truth), random (negative control: a random "
                                   "valid history consistent with the observations), observed-copy "
                                   "(states copied back from the observations) and graph-distance "
                                   "(hitting times from arc distances to the region not yet infected). "
                                   "Every one writes a valid history: S, then I, then R, never S straight "
                                   "to R unless two observed frames force it.")
    p.add_argument("history", help="history file (graph, model, T, n0, observations; truth for `truth`)")
    p.add_argument("--out", required=True, help="prediction file to write (.h5)")
    p.add_argument("--method", required=True, choices=BASELINES, help="which control or baseline")
    p.add_argument("--seed", type=_SEED, default=0, help="seed of the random control (default: 0)")
    _add_schedule(p, default=None)
    common(p)
    p.set_defaults(func=cmd_baseline, inputs=("history",))

    p = sub.add_parser("run-method", help="run a plug-in method (any command) and check its prediction",
                       description="Run COMMAND (split like a shell line, but no shell runs it) with "
                                   "{history} = a copy of the history without the truth, {out} = the "
                                   "prediction it must write, {threads} and {seed}; check the prediction "
                                   "and write it to --out with full provenance (docs/methods.md).")
    p.add_argument("history", help="history file (the plug-in gets a copy without the truth)")
    p.add_argument("--out", required=True, help="prediction file to write (.h5)")
    p.add_argument("--name", required=True, help="the method's name, recorded as its @method")
    p.add_argument("--command", required=True, help="the plug-in's command line with its placeholders")
    p.add_argument("--threads", type=_integer(1, 4096), default=1, help="threads it may use (default: 1)")
    p.add_argument("--seed", type=_SEED, default=0, help="seed handed to the plug-in (default: 0)")
    p.add_argument("--time-limit", type=_seconds, default=86_400.0, metavar="SECONDS",
                   help="stop the plug-in (and what it started) after this many seconds, an error "
                        "(default: 86400, a day)")
    _add_schedule(p, default=None)
    common(p)
    p.set_defaults(func=cmd_run_method, inputs=("history",))

    p = sub.add_parser("score", help="score a prediction against the truth (JSON on stdout, or to --out)",
                       description="HERMES-compatible F1/NRMSE (final frame pinned), unobserved-only "
                                   "F1/NRMSE (observed frames dropped), and causal-violation rates of "
                                   "the prediction and the truth (Eq. 8).")
    p.add_argument("history", help="history file with the truth")
    p.add_argument("prediction", help="prediction file from `battus reconstruct`")
    p.add_argument("--out", help="JSON file to write; then only a one-line summary is printed "
                                 "(default: print the JSON)")
    p.add_argument("--allow-other-history", action="store_true",
                   help="score a prediction whose provenance names another history file (by its sha256)")
    common(p)
    p.set_defaults(func=cmd_score, inputs=("history", "prediction"))

    p = sub.add_parser("info", help="describe a Battus HDF5 file",
                       description="Print the format, attributes and datasets of a graph, history or "
                                   "prediction file.")
    p.add_argument("file", help="a .h5 file")
    common(p)
    p.set_defaults(func=cmd_info, inputs=("file",))
    return parser


def _check_outputs(args: argparse.Namespace) -> None:
    """Every command's output, checked once here before any work: never an input, always writable."""
    from .files import check_output

    out = getattr(args, "out", None)
    if out is not None:  # '' is an error, not "no output"
        check_output(out, [getattr(args, name) for name in args.inputs], option="--out")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error (already printed)
        return int(exc.code or 0)
    # Python reports errors it cannot raise (a buffer freed during a failed unpickling) on stderr;
    # the command's own outcome is what the user needs, in one line.
    unraisable_hook, sys.unraisablehook = sys.unraisablehook, lambda unraisable: None
    # SIGTERM (kill, a scheduler's cancel) stops a command as Ctrl-C does: no output, no plug-in left running
    in_main = threading.current_thread() is threading.main_thread()
    terminate = signal.signal(signal.SIGTERM, _interrupt) if in_main else None
    try:
        with warnings.catch_warnings():
            # Library warnings (pandas casts, numpy, Numba) are noise to a user and would break the
            # one-line error; what the user must know, Battus prints itself.
            warnings.simplefilter("ignore")
            _check_outputs(args)
            args.func(args)
    except InputError as exc:
        print(f"battus: error: {printable(str(exc))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except MemoryError:  # an input larger than its estimate could foresee (a gzip bomb of an edge list)
        print(f"battus: error: {args.command}: memory: the input does not fit in this machine's memory; "
              "nothing written", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("battus: interrupted; no output written", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader of stdout went away (`battus info pred.h5 | head`): no traceback
        # Python flushes stdout again at exit and would report that failure too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # as a tool killed by SIGPIPE
    finally:
        sys.unraisablehook = unraisable_hook
        if terminate is not None:
            signal.signal(signal.SIGTERM, terminate)
    return 0


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
