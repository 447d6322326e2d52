"""The benchmark suite around the engine, used by the Snakemake workflow only: the plan of a
config (:mod:`~battus.suite.experiments`), the SLURM site (:mod:`~battus.suite.cluster`) and the
report's tables and figures (:mod:`~battus.suite.report`)."""
