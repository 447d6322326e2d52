"""Validation, wildcard constraints, paths, input functions, params and resources.

What to run comes from the package: battus.suite.experiments.Plan expands the
validated config into datasets, runs and their options; battus.suite.report says
which tables and figures those runs make and what each one shows.
"""

import os
import re

from snakemake.exceptions import WorkflowError

import battus.download
from battus.suite.config import refused_in_one_line, validate_config
from battus.suite.experiments import Plan
from battus.suite.report import (
    REPORT_ITEMS,
    report_made,
    report_reads,
    report_runs,
    report_spec,
)
from battus.suite.report.summary import summary_spec

# a refused config is one line and exit status 2, as bad input to the battus command line
with refused_in_one_line():
    validate_config(
        config,
        f"{workflow.basedir}/config/schemas/config.schema.yaml",
        files=workflow.overwrite_configfiles
        or [f"{workflow.basedir}/config/config.yaml"],
    )
    # published rows live in the workflow, not in the run folder
    for _key, _path in config["published"].items():
        if not os.path.isabs(_path):
            config["published"][_key] = os.path.join(workflow.basedir, _path)
    PLAN = Plan(config)  # raises "config: ..." on a reference to something undefined
OUT = PLAN.results  # every output of this configuration lives here
DATASETS = PLAN.datasets
TABLES = report_made(PLAN, "table")
FIGURES = report_made(PLAN, "figure")
# The mirror (config `mirror`, overridden by BATTUS_MIRROR) is read by the
# download script only, not passed as a param: switching between the network
# and a mirror reruns nothing. It is checked while the DAG is built, before any
# job runs (a dry run included): see mirror_complete.


def mirror_complete(wildcards):
    """Input function of `download` (it has no input files): when this download is
    to be copied from a mirror that lacks it, stops the run while the DAG is built,
    naming the mirror and every file this configuration would copy and it lacks."""
    if not PLAN.mirror:
        return []
    copy = battus.download.copied_from_mirror(config["downloads"], wildcards.path)
    if copy and not battus.download.find_in_mirror(PLAN.mirror, copy):
        reads = [s["import"] for s in DATASETS.values() if "import" in s]
        reads += [PLAN.graphs[g]["download"] for g in PLAN.edgelist_graphs()]
        raise WorkflowError(
            battus.download.mirror_shortfall(
                PLAN.mirror, config["downloads"], [*reads, wildcards.path]
            )
        )
    return []


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    method="|".join(PLAN.variants),
    variant=r"[A-Za-z0-9][A-Za-z0-9._-]*",


def alternatives(names):
    """A regex matching exactly these names (never matching when empty)."""
    return "|".join(re.escape(x) for x in names) if names else "(?!x)x"


# ---------------------------------------------------------------------------
# Paths.
def history(dataset):
    return f"{OUT}/{dataset}/history.h5"


def prediction(dataset, method, variant):
    return f"{OUT}/{dataset}/{method}/{variant}/prediction.h5"


def score(dataset, method, variant):
    return f"{OUT}/{dataset}/{method}/{variant}/score.json"


def graph_file(graph):
    return f"{OUT}/graphs/{graph}.h5"


def table_file(name, ext):
    return f"{OUT}/report/tables/{name}.{ext}"


def scores_file():
    return f"{OUT}/scores.csv"


def figure_file(name):
    return f"{OUT}/report/figures/{name}.png"


def item_spec_file(item):
    return f"{OUT}/report/specs/{item}.json"


def summary_file(ext):
    return f"{OUT}/report/summary.{ext}"


# ---------------------------------------------------------------------------
# Input functions.
def downloaded(key):
    return f"resources/downloads/{key}"


def import_source(wildcards):
    return downloaded(DATASETS[wildcards.dataset]["import"])


def edgelist_source(wildcards):
    return downloaded(config["graphs"][wildcards.graph]["download"])


def simulation_graph(wildcards):
    spec = DATASETS[wildcards.dataset]
    if "graph" in spec:
        return graph_file(spec["graph"])
    return history(spec["topology"])


def report_inputs(name):
    """The files one table or figure reads, as its registry entry declares them
    (battus.suite.report.report_reads: their wildcards; the published rows it compares with and
    the upstream methods' measured rows it shows beside them).
    """
    paths = {"scores": score, "histories": history, "predictions": prediction}
    inputs = {
        group: [paths[group](*wildcards) for wildcards in files]
        for group, files in report_reads(name, PLAN).items()
    }
    published = REPORT_ITEMS[name].published
    if published:
        inputs["published"] = config["published"][published]
    measured = REPORT_ITEMS[name].measured
    if measured:
        inputs["measured"] = config["published"][measured]
    return inputs


def report_targets():
    targets = [
        table_file(t, ext) for t in TABLES for ext in ("csv", "md", "tex", "html")
    ]
    targets += [figure_file(f) for f in FIGURES]
    targets += [summary_file("rst"), summary_file("html")]  # the report's first page
    # runs that no table reads (`extra`) are still made, and all their numbers in one long table
    return targets + [score(*run) for run in PLAN.all_runs()] + [scores_file()]


def item_spec(item):
    """What a report item's spec file holds (written by report_spec): a table's or figure's spec and
    runs, or what the first page says about the configuration (`summary`)."""
    if item == "summary":
        return {"spec": summary_spec(PLAN, TABLES, FIGURES), "runs": []}
    return {"spec": report_spec(item, PLAN), "runs": report_runs(item, PLAN)}


def archive_paths():
    """What the archive packs: this configuration's own outputs (not other configs' folders
    that may live inside `results`), the configs, the published and measured rows and the captions.
    """
    own = ["graphs", "logs", "benchmarks", "report", "scores.csv", *DATASETS]
    return [f"{OUT}/{x}" for x in own] + [
        "config",
        "data/published",
        "data/measured",
        "reports",
    ]


# ---------------------------------------------------------------------------
# Params: every knob of a job, as the `battus` command's options.
def import_options(wildcards):
    spec = DATASETS[wildcards.dataset]
    return {
        "name": wildcards.dataset,
        "schedule": spec["schedule"],
        "pol_T": spec["pol_T"],
    }


def edgelist_options(wildcards):
    directed = config["graphs"][wildcards.graph]["directed"]
    return {"directed" if directed else "undirected": True, "name": wildcards.graph}


def simulate_options(wildcards):
    spec = DATASETS[wildcards.dataset]
    options = {k: spec[k] for k in ("model", "T", "n0", "beta_i", "beta_r", "seed")}
    # --same-step-recovery is a plain switch: None leaves it off
    same_step = spec.get("same_step_recovery") or None
    return options | {
        "backend": spec["sim_backend"],
        "same_step_recovery": same_step,
        "schedule": spec["schedule"],
        "name": wildcards.dataset,
    }


def reconstruct_command(wildcards):
    # reconstruct (Battus, Battus-Z), baseline (controls, baselines) or run-method (plug-ins)
    return PLAN.command(wildcards.method)


def reconstruct_options(wildcards):
    return PLAN.options(wildcards.dataset, wildcards.method, wildcards.variant)


# ---------------------------------------------------------------------------
# Resources (cluster jobs): sizes from the config, estimates from battus.suite.experiments,
# where they go from the config's `cluster` key (battus.suite.cluster checks them against
# the SLURM site when the executor is slurm; locally none of this is looked at).
from battus.suite.cluster import SlurmSite  # noqa: E402

CLUSTER = SlurmSite(config["cluster"], workflow)


def reconstruct_gpus(wildcards):
    # 0 on the CPU; on the GPU one per device of its --devices (config `devices`), at least 1
    return PLAN.gpus(wildcards.dataset, wildcards.method, wildcards.variant)


def simulate_gpus(wildcards):
    return int(DATASETS[wildcards.dataset]["sim_backend"] == "cuda")


def large_first(wildcards):
    """Priority: the jobs of a `large` dataset, and of the graph one is drawn on, start before the
    other jobs that are ready. They take longest; left to the end of a run, they ran alone while
    the other cores idled."""
    if "dataset" in wildcards.keys():
        return int(bool(DATASETS[wildcards.dataset]["large"]))
    return int(
        any(
            spec["large"] and spec.get("graph") == wildcards.graph
            for spec in DATASETS.values()
        )
    )


def job_threads(gpus):
    """Threads from battus.suite.experiments.Plan.threads (`large_threads` on `large` datasets, a
    plug-in's own, else 1): capped at --cores locally, on SLURM (--cpus-per-task) at
    the CPUs of the largest node of the job's partition.
    """

    def threads(wildcards):
        requested = PLAN.threads(wildcards.dataset, wildcards.get("method"))
        return CLUSTER.threads(requested, bool(gpus(wildcards)))

    return threads


def cluster_resources(gpus=None):
    """slurm_partition (and slurm_account when set) of a rule's jobs: the GPU
    partition for jobs with gpu >= 1, cluster.cpu_partition (site default when empty)
    for the others.
    """
    return CLUSTER.resources(gpus)


def reconstruct_mem_mb(wildcards):
    # the method's, or scoring's (the truth, the prediction and the causal check) when larger
    method = PLAN.reconstruct_mem_mb(wildcards.dataset)
    return max(method, int(1000 + 3 * method / 4))


def reconstruct_runtime(wildcards):
    return PLAN.reconstruct_runtime(
        wildcards.dataset, wildcards.method, wildcards.variant
    )


def simulate_mem_mb(wildcards):
    return PLAN.simulate_mem_mb(wildcards.dataset)


def edgelist_mem_mb(wildcards):
    return PLAN.edgelist_mem_mb(wildcards.graph)


def edgelist_runtime(wildcards):
    return PLAN.edgelist_runtime(wildcards.graph)
