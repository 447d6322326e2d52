"""DHREC, its PCDSVC variant for SI and SIR as DITTO's paper runs it, as a Battus plug-in, run from an
unmodified checkout of q-rz/KDD23-DITTO (its ``dhrec.py``).

    python run_dhrec.py --upstream-home KDD23-DITTO [--device cpu] [--seed S] HISTORY OUT [-- ARGS]

The upstream's code is not copied here: ``--upstream-home`` (default ``$DITTO_HOME``) names a
checkout (commit 339f2d5 was run). The conversion and the one substitution (its ``Tester``) are
``../kdd23.py``'s. DHREC fits the infection and recovery rates to the final frame (the upstream's
``b_estim``, as DITTO does), then peels the history back one frame at a time from the final frame.
The arguments are its ``scripts/dhrec-<dataset>.sh``, the same for every dataset; any can be
overridden after ``--``.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kdd23 import main  # noqa: E402

ARGS = {"b_pI0": 0.001, "b_pR0": 0.001, "b_steps": 500, "b_lr": 0.003}  # scripts/dhrec-<dataset>.sh, every dataset

if __name__ == "__main__":
    main("dhrec", "dhrec.py", ARGS, __doc__)
