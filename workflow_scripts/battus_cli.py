"""Run one `battus` command for a rule, through the CLI's own entry point (battus.cli.main).

The rule names the command (params.command) and its options (params.options,
a dict: ``key: value`` is ``--key value``, True ``--key``, False ``--no-key``,
None the CLI's default); its inputs are the command's positional arguments and
its one output is ``--out``. Around the command this script does what a job
needs and the CLI leaves to its caller: Numba uses the rule's threads, SIGTERM
(a cancelled job, SLURM's scancel) stops it as cleanly as Ctrl-C (no partial
output), temporary files of a hard-killed earlier attempt are removed, and the
command's stdout and stderr go to the rule's log.
"""

import contextlib
import os
import shlex
import sys
import traceback

sys.path.insert(0, os.path.dirname(__file__))
import numba  # noqa: E402
from _common import prepare_outputs  # noqa: E402

from battus.cli import main  # noqa: E402


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


sm = snakemake  # noqa: F821
prepare_outputs(sm)
numba.set_num_threads(min(sm.threads, numba.config.NUMBA_NUM_THREADS))
argv = [sm.params.command, *map(str, sm.input), "--out", str(sm.output[0]), *cli_arguments(sm.params.options)]
with open(sm.log[0], "w") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
    print(shlex.join(["battus", *argv]), flush=True)
    try:
        status = main(argv)
    except BaseException:
        traceback.print_exc()
        raise
if status:
    raise SystemExit(f"battus {sm.params.command} failed with status {status}: see {sm.log[0]}")
