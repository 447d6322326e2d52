"""Rule simulate: synchronous SI/SIR on a graph (or another history's topology)."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import numba  # noqa: E402
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.io import provenance, read_graph, sha256_file, write_history  # noqa: E402
from battus.problem import Problem, observe, schedule_times  # noqa: E402
from battus.simulate import simulate  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
numba.set_num_threads(min(sm.threads, numba.config.NUMBA_NUM_THREADS))
p = sm.params
graph = read_graph(sm.input[0])
times = schedule_times(p.T, p.schedule)
kwargs = {"backend": p.backend} if p.backend != "cpu" else {}
truth = simulate(graph, p.model, p.T, p.n0, p.beta_i, p.beta_r, seed=p.seed,
                 same_step_recovery=p.same_step_recovery, **kwargs)
problem = Problem(graph=graph, model=p.model, T=p.T, n0=p.n0, observations=observe(truth, times), truth=truth,
                  name=sm.wildcards.dataset)
prov = provenance(stage="simulate", graph=sm.input[0], graph_sha256=sha256_file(sm.input[0]), model=p.model,
                  T=p.T, n0=p.n0, beta_i=p.beta_i, beta_r=p.beta_r, seed=p.seed, backend=p.backend,
                  same_step_recovery=p.same_step_recovery, schedule=times.tolist())
write_history(sm.output[0], problem, prov)
final = truth[-1]
log.info("%s: %s on n=%d, final S/I/R = %d/%d/%d", sm.wildcards.dataset, p.model.upper(), graph.n,
         (final == 0).sum(), (final == 1).sum(), (final == 2).sum())
