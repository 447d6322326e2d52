"""Stage 1: downloads (or mirror copies), graphs, and histories."""


localrules:
    download,


rule download:
    input:
        # no files: stops the run before any job when the mirror lacks what it needs
        mirror_complete,
    output:
        "resources/downloads/{path}",
    log:
        # beside the download (shared by every configuration): its URL, source and sha256
        "resources/downloads/{path}.log",
    wildcard_constraints:
        path=alternatives(config["downloads"]),
    # the fetcher retries transient failures itself; a 404, a checksum mismatch or a
    # full disk will not pass (0, not unset, also overrides a profile's --retries)
    retries: 0
    conda:
        "../envs/battus.yaml"
    params:
        url=lambda wc: config["downloads"][wc.path]["url"],
        sha256=lambda wc: config["downloads"][wc.path]["sha256"],
    script:
        "../workflow_scripts/download.py"


rule import_history:
    input:
        import_source,
    output:
        history("{dataset}"),
    log:
        f"{OUT}/logs/import/{{dataset}}.log",
    benchmark:
        f"{OUT}/benchmarks/import/{{dataset}}.tsv"
    wildcard_constraints:
        dataset=alternatives(PLAN.imported()),
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
    params:
        command="import-hermes",
        options=import_options,
    script:
        "../workflow_scripts/battus_cli.py"


rule generate_graph:
    output:
        graph_file("{graph}"),
    log:
        f"{OUT}/logs/graph/{{graph}}.log",
    benchmark:
        f"{OUT}/benchmarks/graph/{{graph}}.tsv"
    wildcard_constraints:
        graph=alternatives(PLAN.generated_graphs()),
    priority: large_first
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
    params:
        spec=lambda wc: {
            k: v
            for k, v in config["graphs"][wc.graph].items()
            if k not in ("label", "paper")
        },
    script:
        "../workflow_scripts/generate_graph.py"


rule edgelist_graph:
    input:
        edgelist_source,
    output:
        graph_file("{graph}"),
    log:
        f"{OUT}/logs/graph/{{graph}}.log",
    benchmark:
        f"{OUT}/benchmarks/graph/{{graph}}.tsv"
    wildcard_constraints:
        graph=alternatives(PLAN.edgelist_graphs()),
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
        mem_mb=edgelist_mem_mb,
        runtime=edgelist_runtime,
    params:
        command="graph",
        options=edgelist_options,
    script:
        "../workflow_scripts/battus_cli.py"


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
        dataset=alternatives(PLAN.simulated()),
    priority: large_first
    conda:
        "../envs/battus.yaml"
    threads: job_threads(simulate_gpus)
    resources:
        **cluster_resources(simulate_gpus),
        mem_mb=simulate_mem_mb,
        gpu=simulate_gpus,
    params:
        command="simulate",
        options=simulate_options,
    script:
        "../workflow_scripts/battus_cli.py"
