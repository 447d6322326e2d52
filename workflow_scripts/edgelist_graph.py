"""Rule edgelist_graph: SNAP edge list -> largest WCC, no loops/duplicates, CSR graph file."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.graph import read_edgelist  # noqa: E402
from battus.io import provenance, sha256_file, write_graph  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
graph = read_edgelist(sm.input[0], directed=sm.params.directed, keep_largest_component=True,
                      name=sm.wildcards.graph)
prov = provenance(stage="graph", source=sm.input[0], source_sha256=sha256_file(sm.input[0]),
                  directed=sm.params.directed, largest_component=True, counts=graph.meta)
write_graph(sm.output[0], graph, prov)
log.info("%s: n=%d arcs=%d |E|=%d", sm.wildcards.graph, graph.n, graph.m, graph.num_edges)
