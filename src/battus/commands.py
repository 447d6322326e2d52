"""What each ``battus`` command does: read its inputs fully, compute, write each output atomically.

:mod:`battus.cli` parses the command line and reports errors; each ``cmd_*`` here gets the parsed
arguments (already checked: outputs never an input, every number in range).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

from .errors import InputError, printable


def _say(quiet: bool):
    def emit(message: str) -> None:
        if not quiet:
            print(f"battus: {printable(message)}", file=sys.stderr, flush=True)

    return emit



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
    """A method never reads the truth: only --schedule does, to re-observe it, and --score, to score
    the prediction against it (read with the rest of the file, before any work)."""
    if args.score is not None:
        return "required"
    return "skip" if args.schedule is None else "optional"


def _write_and_score(args: argparse.Namespace, recon, problem, summary: str,
                     input_sha256: str | Callable[[], str] | None = None) -> None:
    """Write a method's prediction to --out (its observed frames in the provenance), say
    ``summary``, then with --score score the prediction as written, against the history's truth,
    in this process: what `battus score HISTORY OUT --out SCORE` gives for the file."""
    from .io import write_prediction
    from .score import score_prediction

    written = write_prediction(args.out, recon, problem, args.history,
                               extra={"observed_times": problem.observations.times.tolist()},
                               input_sha256=input_sha256)
    _say(args.quiet)(f"{summary} -> {args.out}")
    if args.score is not None:
        result = score_prediction(problem, written, str(args.out))
        _write_scores({**result, "prediction": str(args.out), "history": str(args.history)}, args.score, args.quiet)


def _write_scores(result: dict, out: str | None, quiet: bool) -> None:
    """A score record as JSON: on stdout, or to ``out`` with a one-line summary."""
    from .io import atomic_path

    text = json.dumps(result, indent=2, default=_json_default)
    if not out:
        print(text)
        return
    with atomic_path(out) as tmp:
        tmp.write_text(text + "\n")
    _say(quiet)(score_summary(result) + f" -> {out}")


def cmd_reconstruct(args: argparse.Namespace) -> None:
    import concurrent.futures

    from .cuda_driver import start_driver
    from .files import sha256_file

    options = options_from_args(args)
    # While the history is read, in threads: its sha256, for the prediction's provenance (on a
    # large history as long as the reading); the backend chosen and warmed up, its imports
    # included (Numba, Numba-CUDA, every kernel the options run loaded from Numba's cache: on a
    # GPU longer than the reading); and beside those imports the CUDA driver started, with the
    # device's context. All start before this thread imports what reading takes, which needs
    # neither Numba nor the GPU.
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=3)
    input_sha256 = pool.submit(sha256_file, args.history)
    if args.backend != "cpu":
        pool.submit(start_driver, args.devices[0] if args.devices else 0)
    chosen = concurrent.futures.Future()
    warmed = pool.submit(_start_backend, args, options, chosen)

    from .io import read_history
    from .memory import reconstruct_bytes, require

    try:
        problem = _observed(read_history(args.history, truth=_truth_for(args)), args)
        from .backends import Started  # Numba's import, made in the other thread meanwhile
        from .pipeline import reconstruct

        require(reconstruct_bytes(problem.n, problem.graph.m, problem.T, keep_posteriors=args.posteriors,
                                  causal=options.causal, fit_chunk=options.fit_settings.chunk if options.fit else 0),
                args.history, "T", f"T={problem.T} frames of {problem.n} vertices")
        say = _say(args.quiet)
        say(f"{options.method} on {problem.name or args.history}: n={problem.n} arcs={problem.graph.m} "
            f"T={problem.T} observed={problem.observations.times.tolist()}")
        recon = reconstruct(problem, options, backend=args.backend, keep_posteriors=args.posteriors, progress=say,
                            repeats=args.repeats, repeat_seconds=args.repeat_seconds, devices=args.devices,
                            started=Started(chosen, warmed))
    finally:
        _close_started(warmed)  # reconstruct closed it, unless reading failed first (closing is idempotent)
    runs = recon.extras.get("algorithm_seconds_runs", [recon.algorithm_seconds])
    timed = f"median of {len(runs)} runs " if len(runs) > 1 else ""
    _write_and_score(args, recon, problem,
                     f"done in {timed}{recon.algorithm_seconds * 1e3:.1f} ms on {recon.backend} ({recon.device}); "
                     f"rates=({recon.beta_i:.4g}, {recon.beta_r:.4g})", input_sha256.result)
    pool.shutdown()


def _start_backend(args: argparse.Namespace, options, chosen):
    """:func:`battus.backends.start_backend` for the command's options, its imports included."""
    from .backends import start_backend
    from .pipeline import warm_up_for

    return start_backend(args.backend, args.devices, warm_up_for(options, args.posteriors), chosen)


def _close_started(warmed) -> None:
    """Wait for a backend started beside the reading, and close it (its error, if it failed, is
    the reconstruction's to report, or moot after a bad input)."""
    try:
        backend = warmed.result()
    except BaseException:  # noqa: BLE001 - reported where the backend is used, or moot
        return
    backend.close()


def cmd_baseline(args: argparse.Namespace) -> None:
    from .baselines import baseline
    from .io import read_history
    from .memory import history_bytes, require

    problem = _observed(read_history(args.history, truth="required" if args.method == "truth" else _truth_for(args)),
                        args)
    require(3 * history_bytes(problem.n, problem.T), args.history, "T", f"T={problem.T} frames of {problem.n} vertices")
    recon = baseline(problem, args.method, seed=args.seed)
    _write_and_score(args, recon, problem,
                     f"{args.method} on {problem.name or args.history} in {recon.algorithm_seconds * 1e3:.1f} ms")


def cmd_run_method(args: argparse.Namespace) -> None:
    import shlex

    from .io import read_history
    from .plugins import run_method

    try:
        argv = shlex.split(args.command)
    except ValueError as exc:
        raise InputError("--command", "command", str(exc)) from None
    problem = _observed(read_history(args.history, truth=_truth_for(args)), args)
    # --quiet: the plug-in's output is kept and shown only if it fails, not streamed
    recon = run_method(args.name, argv, problem, threads=args.threads, seed=args.seed,
                       progress=None if args.quiet else _say(False), time_limit=args.time_limit)
    _write_and_score(args, recon, problem, f"method {args.name} on {problem.name or args.history} in "
                     f"{recon.algorithm_seconds * 1e3:.1f} ms ({recon.extras['plugin_timing']})")


def cmd_score(args: argparse.Namespace) -> None:
    from .io import read_history, read_prediction, sha256_file
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
    _write_scores(result, args.out, args.quiet)


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
