"""Stage 2: one prediction per (dataset, method, variant) -- Battus, a control or baseline, or a
plug-in -- then all three scorers."""


rule reconstruct:
    input:
        history("{dataset}"),
    output:
        prediction("{dataset}", "{method}", "{variant}"),
    log:
        f"{OUT}/logs/reconstruct/{{dataset}}/{{method}}/{{variant}}.log",
    benchmark:
        f"{OUT}/benchmarks/reconstruct/{{dataset}}/{{method}}/{{variant}}.tsv"
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


rule score:
    input:
        history=history("{dataset}"),
        prediction=prediction("{dataset}", "{method}", "{variant}"),
    output:
        score("{dataset}", "{method}", "{variant}"),
    log:
        f"{OUT}/logs/score/{{dataset}}/{{method}}/{{variant}}.log",
    benchmark:
        f"{OUT}/benchmarks/score/{{dataset}}/{{method}}/{{variant}}.tsv"
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
        mem_mb=score_mem_mb,
    params:
        command="score",
        options={"quiet": True},
    script:
        "../workflow_scripts/battus_cli.py"
