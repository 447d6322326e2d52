"""Stage 2: one reconstruction per (dataset, method, variant), then all three scorers."""


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
    threads: job_threads
    resources:
        gpu=uses_gpu,
        mem_mb=reconstruct_mem_mb,
        runtime=reconstruct_runtime,
    params:
        options=reconstruct_options,
    script:
        "../workflow_scripts/reconstruct.py"


rule score:
    input:
        history=history("{dataset}"),
        prediction=prediction("{dataset}", "{method}", "{variant}"),
    output:
        score("{dataset}", "{method}", "{variant}"),
    log:
        f"{OUT}/logs/score/{{dataset}}/{{method}}/{{variant}}.log",
    conda:
        "../envs/battus.yaml"
    resources:
        mem_mb=lambda wc: int(1000 + 3 * reconstruct_mem_mb(wc) / 4),
    script:
        "../workflow_scripts/score.py"
