"""Run one `battus` command for a rule, through the CLI's own entry point (battus.cli.main).

The rule names the command (params.command) and its options (params.options,
a dict: ``key: value`` is ``--key value``, True ``--key``, False ``--no-key``,
None the CLI's default); its inputs are the command's positional arguments and
its one output is ``--out``. Around the command this script does what a job
needs and the CLI leaves to its caller: Numba and a plug-in's {threads} use the
rule's threads (capped at --cores, or on SLURM at the partition's CPUs per
node), SIGTERM (a cancelled job, SLURM's scancel) stops it as cleanly as Ctrl-C
(no partial output), temporary files of a hard-killed earlier attempt are removed, the
command's stdout and stderr go to the rule's log, an input that
is a download has its URL passed as --source-url (recorded in the output's
provenance), and a failure is one line on
the terminal: when it names one of the job's inputs (a truncated history a
killed copy left with its old modification time, which Snakemake does not
notice), the line says how to remake that input. A bug's traceback goes to the
end of the log only (and to the terminal under BATTUS_DEBUG=1). When the rule has a `score` output (the
reconstruct rule), the command scores its prediction against the job's history itself (`--score`): the
history is read once, and the prediction is scored as written, without reading it back.
"""

import contextlib
import os
import shlex
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))
import numba  # noqa: E402
from _common import debugging, prepare_outputs  # noqa: E402

import battus.plugins  # noqa: E402
from battus.cli import exit_now, main  # noqa: E402


def cli_arguments(options: dict) -> list[str]:
    args = []
    for key, value in options.items():
        flag = key.replace("_", "-")
        if value is True:
            args.append(f"--{flag}")
        elif value is False:
            args.append(f"--no-{flag}")
        elif value is not None:
            args += [f"--{flag}", str(value)]
    return args


def download_url(sm) -> str | None:
    """The URL of the job's input when it is a download (resources/downloads/<key>), else None."""
    downloads = sm.config.get("downloads", {})
    for path in map(str, sm.input):
        key = path.removeprefix("resources/downloads/")
        if key != path and key in downloads:
            return downloads[key]["url"]
    return None


def last_error(log_path: str) -> str | None:
    """The CLI's one-line error ('battus: error: ...'), the last one in the log."""
    with open(log_path, errors="replace") as fh:
        errors = [line.rstrip("\n") for line in fh if line.startswith("battus: error: ")]
    return errors[-1] if errors else None


def with_recovery_hint(error: str, inputs: list[str]) -> str:
    """``error`` plus how to remake the input it names, if it names one of ``inputs``."""
    for path in inputs:
        if error.startswith(f"battus: error: {path}: "):
            return (f"{error} -- if {path} is damaged (a killed copy, a full disk), delete it or rerun "
                    f"with --forcerun {path}")
    return error


sm = snakemake  # noqa: F821
# a plug-in's command names files of the workflow as {workflow}/... (battus.plugins): this folder's parent
os.environ[battus.plugins.WORKFLOW_ENV] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
prepare_outputs(sm)
numba.set_num_threads(min(sm.threads, numba.config.NUMBA_NUM_THREADS))
inputs = [str(x) for x in sm.input]
options = dict(sm.params.options)
if (url := download_url(sm)) is not None:  # `battus graph` and `import-hermes` record where it came from
    options["source_url"] = url
if sm.params.command == "run-method":
    # a plug-in's {threads} is the job's threads: the config's, capped at --cores locally and at
    # the partition's CPUs per node on SLURM (battus.suite.cluster), as Numba's are above
    options["threads"] = sm.threads
out = str(sm.output[0])
if "score" in sm.output.keys():  # the reconstruct rule: the prediction scored by the process that made it
    options["score"] = str(sm.output.score)
argv = [sm.params.command, *inputs, "--out", out, *cli_arguments(options)]
crash = None
with open(sm.log[0], "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
    print(shlex.join(["battus", *argv]), flush=True)
    try:
        status = main(argv)
    except BaseException as exc:  # a bug, or KeyboardInterrupt from SIGTERM: one line, traceback last
        crash = exc
        print(f"battus {argv[0]}: {type(exc).__name__}: {exc}", flush=True)
        traceback.print_exc()
if crash is not None:
    if debugging():
        traceback.print_exception(crash)
    sys.exit(f"battus {argv[0]} failed: {type(crash).__name__}: {crash} (traceback at the end of {sm.log[0]})")
if status:
    error = last_error(sm.log[0])
    if error is None:
        sys.exit(f"battus {argv[0]} failed with status {status}: see {sm.log[0]}")
    hinted = with_recovery_hint(error, inputs)
    if hinted != error:
        with open(sm.log[0], "a") as log:
            print(hinted, file=log)
    print(hinted, file=sys.stderr)
    sys.exit(status)
# The outputs are in place: the job's process ends at once, as the `battus` command does, without
# tearing down the interpreter, Numba and any CUDA context (0.2 s of each small job on a CPU, most
# of a second after a large graph on a GPU).
exit_now(0)
