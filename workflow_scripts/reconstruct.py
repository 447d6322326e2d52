"""Rule reconstruct: one (dataset, method, variant) reconstruction -> prediction file."""

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
import numba  # noqa: E402
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.fit import FitSettings  # noqa: E402
from battus.infer import method_options, reconstruct  # noqa: E402
from battus.io import read_history, write_prediction  # noqa: E402
from battus.problem import observe, schedule_times  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
numba.set_num_threads(min(sm.threads, numba.config.NUMBA_NUM_THREADS))
opts = dict(sm.params.options)
method, backend, schedule = sm.wildcards.method, opts.pop("backend"), opts.pop("schedule")
fit_keys = ("grid_points", "refine_points", "refine_rounds", "rate_lower", "rate_upper")
if any(k in opts for k in fit_keys):
    fs = {k: opts.pop(k) for k in fit_keys if k in opts}
    opts["fit_settings"] = FitSettings(grid_points=fs["grid_points"], refine_points=fs["refine_points"],
                                       refine_rounds=fs["refine_rounds"], lower=fs["rate_lower"],
                                       upper=fs["rate_upper"])
options = method_options(method, **opts)
problem = read_history(sm.input[0])
if schedule:
    problem.observations = observe(problem.truth, schedule_times(problem.T, schedule))
log.info("%s/%s/%s: n=%d arcs=%d T=%d options=%s", sm.wildcards.dataset, method, sm.wildcards.variant, problem.n,
         problem.graph.m, problem.T, options.as_dict())
recon = reconstruct(problem, options, backend=backend, progress=log.info)
write_prediction(sm.output[0], recon, problem, sm.input[0],
                 extra={"observed_times": problem.observations.times.tolist(), "variant": sm.wildcards.variant})
log.info("done in %.1f ms on %s (%s); rates=(%.4g, %.4g)", 1e3 * recon.algorithm_seconds, recon.backend,
         recon.device, recon.beta_i, recon.beta_r)
