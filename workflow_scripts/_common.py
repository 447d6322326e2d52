"""Shared helpers of the workflow scripts: logging to the rule's log file, stale temporary files."""

import logging
import os
import signal
import sys
import traceback

from battus.errors import InputError
from battus.files import remove_stale_temporaries

# BATTUS_DEBUG=1 also prints the traceback of an unexpected error on the terminal; without it the
# traceback goes only to the end of the rule's log, below the one line that says what failed.
DEBUG_ENV = "BATTUS_DEBUG"


def debugging() -> bool:
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def setup_log(snakemake) -> logging.Logger:
    """Send log records to the rule's log file (and stderr); an uncaught error becomes one line.

    Bad input (:class:`InputError`) is one line and nothing more. Any other error is one line too,
    with its traceback written after it at the end of the log (and on stderr under BATTUS_DEBUG), so
    the line a user reads first says what failed, not where in the code.
    """
    log = logging.getLogger("battus.workflow")
    log.setLevel(logging.INFO)
    log_file = str(snakemake.log[0]) if snakemake.log else None
    handlers = [logging.StreamHandler(sys.stderr)]
    if log_file:
        handlers.append(logging.FileHandler(log_file, mode="w"))
    for h in handlers:
        h.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(h)

    def hook(kind, value, tb):
        if issubclass(kind, InputError):
            log.error("battus: error: %s", value)
            return
        where = f" (traceback at the end of {log_file})" if log_file and not debugging() else ""
        log.error("failed: %s: %s%s", kind.__name__, value, where)
        text = "".join(traceback.format_exception(kind, value, tb))
        if log_file:
            with open(log_file, "a") as fh:
                fh.write(text)
        if debugging() or not log_file:
            sys.stderr.write(text)

    sys.excepthook = hook
    return log


def _terminate(signum, frame):
    # turn SIGTERM (Snakemake cancelling the job, or SLURM's scancel) into an
    # exception so that battus.io.atomic_path removes its temporary file
    raise KeyboardInterrupt(f"signal {signum}")


def prepare_outputs(snakemake) -> None:
    """Make SIGTERM clean up like Ctrl-C, and remove temporary files that killed writers left
    beside our outputs (only those: another run in this folder may be writing the same output)."""
    signal.signal(signal.SIGTERM, _terminate)
    for out in snakemake.output:
        remove_stale_temporaries(out)
