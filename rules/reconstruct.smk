"""Stage 2: one prediction per (dataset, method, variant) -- Battus, a control or baseline, or a
plug-in -- and its three scores, in one job: the command scores the prediction it made (`--score`),
so a run costs one process start and one read of its history, not two, and a single ablation still
reruns alone."""


rule reconstruct:
    input:
        history("{dataset}"),
    output:
        prediction=prediction("{dataset}", "{method}", "{variant}"),
        score=score("{dataset}", "{method}", "{variant}"),
    log:
        f"{OUT}/logs/reconstruct/{{dataset}}/{{method}}/{{variant}}.log",
    benchmark:
        f"{OUT}/benchmarks/reconstruct/{{dataset}}/{{method}}/{{variant}}.tsv"
    priority: large_first
    conda:
        "../envs/battus-cuda.yaml"
    threads: job_threads(reconstruct_gpus)
    resources:
        **cluster_resources(reconstruct_gpus),
        gpu=reconstruct_gpus,
        mem_mb=reconstruct_mem_mb,
        runtime=reconstruct_runtime,
    params:
        command=reconstruct_command,
        # every knob, normalised: editing one ablation reruns only its jobs
        options=reconstruct_options,
    script:
        "../workflow_scripts/battus_cli.py"
