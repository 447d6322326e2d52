"""Shared helpers of the workflow scripts: logging to the rule's log file."""

import logging
import signal
import sys
from pathlib import Path


def setup_log(snakemake) -> logging.Logger:
    """Send log records and uncaught errors to the rule's log file (and stderr)."""
    log = logging.getLogger("battus.workflow")
    log.setLevel(logging.INFO)
    handlers = [logging.StreamHandler(sys.stderr)]
    if snakemake.log:
        handlers.append(logging.FileHandler(str(snakemake.log[0]), mode="w"))
    for h in handlers:
        h.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(h)

    def hook(kind, value, tb):
        log.error("failed: %s: %s", kind.__name__, value, exc_info=(kind, value, tb))

    sys.excepthook = hook
    return log


def _terminate(signum, frame):
    # turn SIGTERM (Snakemake cancelling the job, or SLURM's scancel) into an
    # exception so that battus.io.atomic_path removes its temporary file
    raise KeyboardInterrupt(f"signal {signum}")


def prepare_outputs(snakemake) -> None:
    """Remove temporary files a hard-killed earlier attempt left beside our outputs."""
    signal.signal(signal.SIGTERM, _terminate)
    for out in snakemake.output:
        out = Path(out)
        if out.parent.is_dir():
            for stale in out.parent.glob(f".{out.name}.*.tmp"):
                stale.unlink(missing_ok=True)
