"""GCN (PyTorch Geometric's, trained on histories simulated with the fitted rates, as DITTO's paper
compares it) as a Battus plug-in, run from an unmodified checkout of q-rz/KDD23-DITTO (its ``gcn.py``).

    python run_gcn.py --upstream-home KDD23-DITTO [--device cpu] [--seed S] HISTORY OUT [-- ARGS]

The upstream's code is not copied here: ``--upstream-home`` (default ``$DITTO_HOME``) names a
checkout (commit 339f2d5 was run). The conversion and the one substitution (its ``Tester``) are
``../kdd23.py``'s. The arguments are its ``scripts/gcn-<dataset>.sh``, the same for the four
real-diffusion datasets it has scripts for (DITTO's paper runs it on those only); any can be
overridden after ``--``. As run, ``gcn.py``'s training loop calls ``opt.step()`` without
``loss.backward()``, so the network keeps its initial weights; the wrapper changes nothing of that.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kdd23 import main  # noqa: E402

# scripts/gcn-<dataset>.sh, every dataset (farmers-si, pol-si, covid-sir, heb-sir)
ARGS = {"b_pI0": 0.001, "b_pR0": 0.001, "b_steps": 500, "b_lr": 0.003, "lr": 0.001, "epochs": 1000,
        "batch_size": 16, "units": 64, "layers": 3, "dropout": 0.1}

if __name__ == "__main__":
    main("gcn", "gcn.py", ARGS, __doc__)
