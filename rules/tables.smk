"""Stage 3: the paper's tables as CSV, Markdown and LaTeX (booktabs) under <results>/report/tables."""


rule table_datasets:
    input:
        histories=dataset_histories(),
    output:
        csv=report(
            f"{OUT}/report/tables/datasets.csv",
            caption="../reports/datasets.rst",
            category="Tables",
            labels={"table": "datasets"},
        ),
        md=f"{OUT}/report/tables/datasets.md",
        tex=f"{OUT}/report/tables/datasets.tex",
    log:
        f"{OUT}/logs/tables/datasets.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="datasets",
        runs=table_runs("datasets"),
        spec=lambda wc: table_spec("datasets"),
    script:
        "../workflow_scripts/make_table.py"


rule table_ablation:
    input:
        scores=score_files(table_runs("ablation")),
    output:
        csv=report(
            f"{OUT}/report/tables/ablation.csv",
            caption="../reports/ablation.rst",
            category="Tables",
            labels={"table": "ablation"},
        ),
        md=f"{OUT}/report/tables/ablation.md",
        tex=f"{OUT}/report/tables/ablation.tex",
    log:
        f"{OUT}/logs/tables/ablation.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="ablation",
        runs=table_runs("ablation"),
        spec=lambda wc: table_spec("ablation"),
    script:
        "../workflow_scripts/make_table.py"


rule table_canonical_quality:
    input:
        scores=score_files(table_runs("canonical_quality")),
        published=config["published"]["hermes_table2"],
    output:
        csv=report(
            f"{OUT}/report/tables/canonical_quality.csv",
            caption="../reports/canonical_quality.rst",
            category="Tables",
            labels={"table": "canonical_quality"},
        ),
        md=f"{OUT}/report/tables/canonical_quality.md",
        tex=f"{OUT}/report/tables/canonical_quality.tex",
    log:
        f"{OUT}/logs/tables/canonical_quality.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="canonical_quality",
        runs=table_runs("canonical_quality"),
        spec=lambda wc: table_spec("canonical_quality"),
    script:
        "../workflow_scripts/make_table.py"


rule table_unobserved_quality:
    input:
        scores=score_files(table_runs("unobserved_quality")),
    output:
        csv=report(
            f"{OUT}/report/tables/unobserved_quality.csv",
            caption="../reports/unobserved_quality.rst",
            category="Tables",
            labels={"table": "unobserved_quality"},
        ),
        md=f"{OUT}/report/tables/unobserved_quality.md",
        tex=f"{OUT}/report/tables/unobserved_quality.tex",
    log:
        f"{OUT}/logs/tables/unobserved_quality.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="unobserved_quality",
        runs=table_runs("unobserved_quality"),
        spec=lambda wc: table_spec("unobserved_quality"),
    script:
        "../workflow_scripts/make_table.py"


rule table_feasibility_sensitivity:
    input:
        scores=score_files(table_runs("feasibility_sensitivity")),
    output:
        csv=report(
            f"{OUT}/report/tables/feasibility_sensitivity.csv",
            caption="../reports/feasibility_sensitivity.rst",
            category="Tables",
            labels={"table": "feasibility_sensitivity"},
        ),
        md=f"{OUT}/report/tables/feasibility_sensitivity.md",
        tex=f"{OUT}/report/tables/feasibility_sensitivity.tex",
    log:
        f"{OUT}/logs/tables/feasibility_sensitivity.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="feasibility_sensitivity",
        runs=table_runs("feasibility_sensitivity"),
        spec=lambda wc: table_spec("feasibility_sensitivity"),
    script:
        "../workflow_scripts/make_table.py"


rule table_tau_sensitivity:
    input:
        scores=score_files(table_runs("tau_sensitivity")),
    output:
        csv=report(
            f"{OUT}/report/tables/tau_sensitivity.csv",
            caption="../reports/tau_sensitivity.rst",
            category="Tables",
            labels={"table": "tau_sensitivity"},
        ),
        md=f"{OUT}/report/tables/tau_sensitivity.md",
        tex=f"{OUT}/report/tables/tau_sensitivity.tex",
    log:
        f"{OUT}/logs/tables/tau_sensitivity.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="tau_sensitivity",
        runs=table_runs("tau_sensitivity"),
        spec=lambda wc: table_spec("tau_sensitivity"),
    script:
        "../workflow_scripts/make_table.py"


rule table_rate_robustness:
    input:
        scores=score_files(table_runs("rate_robustness")),
    output:
        csv=report(
            f"{OUT}/report/tables/rate_robustness.csv",
            caption="../reports/rate_robustness.rst",
            category="Tables",
            labels={"table": "rate_robustness"},
        ),
        md=f"{OUT}/report/tables/rate_robustness.md",
        tex=f"{OUT}/report/tables/rate_robustness.tex",
    log:
        f"{OUT}/logs/tables/rate_robustness.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="rate_robustness",
        runs=table_runs("rate_robustness"),
        spec=lambda wc: table_spec("rate_robustness"),
    script:
        "../workflow_scripts/make_table.py"


rule table_large_results:
    input:
        scores=score_files(table_runs("large_results")),
    output:
        csv=report(
            f"{OUT}/report/tables/large_results.csv",
            caption="../reports/large_results.rst",
            category="Tables",
            labels={"table": "large_results"},
        ),
        md=f"{OUT}/report/tables/large_results.md",
        tex=f"{OUT}/report/tables/large_results.tex",
    log:
        f"{OUT}/logs/tables/large_results.log",
    conda:
        "../envs/battus.yaml"
    params:
        table="large_results",
        runs=table_runs("large_results"),
        spec=lambda wc: table_spec("large_results"),
    script:
        "../workflow_scripts/make_table.py"
