"""Stage 1: downloads (or mirror copies), graphs, and histories."""


localrules:
    download,


rule download:
    output:
        "resources/downloads/{path}",
    log:
        f"{OUT}/logs/download/{{path}}.log",
    wildcard_constraints:
        path=_alternatives(DOWNLOADS),
    retries: 3
    conda:
        "../envs/battus.yaml"
    params:
        url=lambda wc: DOWNLOADS[wc.path]["url"],
        sha256=lambda wc: DOWNLOADS[wc.path]["sha256"],
    script:
        "../workflow_scripts/download.py"


rule import_history:
    input:
        lambda wc: f"resources/downloads/{DATASETS[wc.dataset]['import']}",
    output:
        history("{dataset}"),
    log:
        f"{OUT}/logs/import/{{dataset}}.log",
    wildcard_constraints:
        dataset=_alternatives(IMPORTED),
    conda:
        "../envs/battus.yaml"
    params:
        schedule=lambda wc: DATASETS[wc.dataset]["schedule"],
        pol_T=lambda wc: DATASETS[wc.dataset]["pol_T"],
    script:
        "../workflow_scripts/import_history.py"


rule generate_graph:
    output:
        graph_file("{graph}"),
    log:
        f"{OUT}/logs/graph/{{graph}}.log",
    benchmark:
        f"{OUT}/benchmarks/graph/{{graph}}.tsv"
    wildcard_constraints:
        graph=_alternatives(GENERATED_GRAPHS),
    conda:
        "../envs/battus.yaml"
    params:
        spec=lambda wc: {
            k: v for k, v in GRAPHS[wc.graph].items() if k not in ("label", "paper")
        },
    script:
        "../workflow_scripts/generate_graph.py"


rule edgelist_graph:
    input:
        lambda wc: f"resources/downloads/{GRAPHS[wc.graph]['download']}",
    output:
        graph_file("{graph}"),
    log:
        f"{OUT}/logs/graph/{{graph}}.log",
    benchmark:
        f"{OUT}/benchmarks/graph/{{graph}}.tsv"
    wildcard_constraints:
        graph=_alternatives(EDGELIST_GRAPHS),
    conda:
        "../envs/battus.yaml"
    resources:
        mem_mb=edgelist_mem_mb,
        runtime=edgelist_runtime,
    params:
        directed=lambda wc: GRAPHS[wc.graph]["directed"],
    script:
        "../workflow_scripts/edgelist_graph.py"


rule simulate:
    input:
        simulation_graph,
    output:
        history("{dataset}"),
    log:
        f"{OUT}/logs/simulate/{{dataset}}.log",
    benchmark:
        f"{OUT}/benchmarks/simulate/{{dataset}}.tsv"
    wildcard_constraints:
        dataset=_alternatives(SIMULATED),
    conda:
        "../envs/battus.yaml"
    threads: job_threads
    resources:
        mem_mb=simulate_mem_mb,
        gpu=lambda wc: 1 if DATASETS[wc.dataset]["sim_backend"] == "cuda" else 0,
    params:
        model=lambda wc: DATASETS[wc.dataset]["model"],
        T=lambda wc: DATASETS[wc.dataset]["T"],
        n0=lambda wc: DATASETS[wc.dataset]["n0"],
        beta_i=lambda wc: DATASETS[wc.dataset]["beta_i"],
        beta_r=lambda wc: DATASETS[wc.dataset]["beta_r"],
        seed=lambda wc: DATASETS[wc.dataset]["seed"],
        backend=lambda wc: DATASETS[wc.dataset]["sim_backend"],
        same_step_recovery=lambda wc: DATASETS[wc.dataset].get(
            "same_step_recovery", False
        ),
        schedule=lambda wc: DATASETS[wc.dataset]["schedule"],
    script:
        "../workflow_scripts/simulate.py"
