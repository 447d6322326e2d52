"""The ``battus`` command line.

Every command reads its inputs fully, computes, then writes each output
atomically; any bad input ends with one line ``battus: error: FILE: FIELD:
message`` on stderr and exit status 2, leaving no output file behind.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import warnings
from typing import NoReturn

from . import __version__
from .baselines import BASELINES  # names only: the module loads numpy alone
from .commands import (
    cmd_baseline,
    cmd_graph,
    cmd_import_hermes,
    cmd_info,
    cmd_reconstruct,
    cmd_run_method,
    cmd_score,
    cmd_simulate,
)
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


def _add_schedule(p: argparse.ArgumentParser, default: str | None = "benchmark") -> None:
    p.add_argument(
        "--schedule", default=default,
        help="observed frames: 'benchmark' = {floor(T/2), T} (HERMES protocol), 'final' = {T} "
             "(DITTO), 'all', 'every:K', or an explicit list '3,7,10'"
             + (f" (default: {default})" if default else " (default: the file's own observations)"),
    )


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

    def score_out(p):
        p.add_argument("--score", metavar="JSON",
                       help="also score the prediction against the history's truth, as `battus score HISTORY "
                            "OUT --out JSON` would, in this process: the history is read once (it must hold "
                            "the truth; checked before any work)")

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
    score_out(p)
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
    score_out(p)
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
    score_out(p)
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
    from .files import check_output, same_file

    inputs = [getattr(args, name) for name in args.inputs]
    out = getattr(args, "out", None)
    if out is not None:  # '' is an error, not "no output"
        check_output(out, inputs, option="--out")
    scores = getattr(args, "score", None)
    if scores is not None:
        if out is not None and same_file(scores, out):
            raise InputError(scores, "--score", "is the same file as --out; name another file for the scores")
        check_output(scores, inputs, option="--score")


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


def exit_now(code: int) -> NoReturn:
    """End the process at once with ``code``, once what it printed is flushed.

    For a process whose outputs are all closed and renamed into place (or, after an error,
    never made): what is left is tearing it down, the interpreter's objects, the reading and
    writing threads, and after a GPU run the CUDA context with every device array; after a
    reconstruction of a large graph that took most of a second, all of it freed by the operating
    system at exit anyway.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the reader went away, or the stream is closed
            pass
    os._exit(code)


def run() -> NoReturn:
    """The ``battus`` command: :func:`main`, then the process ends at once with its exit status."""
    exit_now(main())


if __name__ == "__main__":
    run()
