"""Rule generate_graph: a seeded BA / ER / power-law graph -> graph file."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.generators import generate  # noqa: E402
from battus.io import provenance, write_graph  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
spec = dict(sm.params.spec)
graph = generate(spec.pop("generator"), spec.pop("seed"), name=sm.wildcards.graph, **spec)
write_graph(sm.output[0], graph, provenance(stage="generate", **sm.params.spec))
log.info("%s: n=%d edges=%d", sm.wildcards.graph, graph.n, graph.num_edges)
