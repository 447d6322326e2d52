"""CRI (clustering and reverse infection, as DITTO's paper compares it) as a Battus plug-in, run from an
unmodified checkout of q-rz/KDD23-DITTO (its ``cri.py``).

    python run_cri.py --upstream-home KDD23-DITTO [--device cpu] [--seed S] HISTORY OUT [-- ARGS]

The upstream's code is not copied here: ``--upstream-home`` (default ``$DITTO_HOME``) names a
checkout (commit 339f2d5 was run). The conversion and the one substitution (its ``Tester``) are
``../kdd23.py``'s. CRI reads the final frame only; it predicts S or I (never R) before T. Its
``scripts/cri-<dataset>.sh`` pass nothing but the dataset, seed, folders and device, so there is no
preset.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kdd23 import main  # noqa: E402

ARGS: dict = {}  # scripts/cri-<dataset>.sh, every dataset

if __name__ == "__main__":
    main("cri", "cri.py", ARGS, __doc__)
