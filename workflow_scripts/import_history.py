"""Rule import_history: a DITTO/HERMES .pt export (or rt-pol.txt) -> history file."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.hermes import canonical_from_pt, pol_from_retweets  # noqa: E402
from battus.io import provenance, sha256_file, write_history  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
src = sm.input[0]
name = sm.wildcards.dataset
canon = pol_from_retweets(src, T=sm.params.pol_T) if src.endswith(".txt") else canonical_from_pt(src, name=name)
canon.name = name
problem = canon.to_problem(sm.params.schedule)
prov = provenance(stage="import-hermes", source=src, source_sha256=sha256_file(src),
                  schedule=problem.observations.times.tolist())
write_history(sm.output[0], problem, prov)
log.info("%s: n=%d |E|=%d T=%d n0=%d model=%s", name, canon.graph.n, canon.graph.num_edges, canon.T,
         canon.n0, canon.model)
