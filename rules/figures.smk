"""Stage 3: figures (PNG) under <results>/report/figures."""


rule figure_tau_curves:
    input:
        scores=score_files(table_runs("tau_curves")),
    output:
        report(
            f"{OUT}/report/figures/tau_curves.png",
            caption="../reports/tau_curves.rst",
            category="Figures",
            labels={"figure": "tau_curves"},
        ),
    log:
        f"{OUT}/logs/figures/tau_curves.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="tau_curves",
        runs=table_runs("tau_curves"),
        spec=lambda wc: table_spec("tau_curves"),
    script:
        "../workflow_scripts/make_figure.py"


rule figure_rate_grid_heatmaps:
    input:
        scores=score_files(table_runs("rate_grid_heatmaps")),
    output:
        report(
            f"{OUT}/report/figures/rate_grid_heatmaps.png",
            caption="../reports/rate_grid_heatmaps.rst",
            category="Figures",
            labels={"figure": "rate_grid_heatmaps"},
        ),
    log:
        f"{OUT}/logs/figures/rate_grid_heatmaps.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="rate_grid_heatmaps",
        runs=table_runs("rate_grid_heatmaps"),
        spec=lambda wc: table_spec("rate_grid_heatmaps"),
    script:
        "../workflow_scripts/make_figure.py"


rule figure_canonical_bars:
    input:
        scores=score_files(table_runs("canonical_bars")),
        published=config["published"]["hermes_table2"],
    output:
        report(
            f"{OUT}/report/figures/canonical_bars.png",
            caption="../reports/canonical_bars.rst",
            category="Figures",
            labels={"figure": "canonical_bars"},
        ),
    log:
        f"{OUT}/logs/figures/canonical_bars.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="canonical_bars",
        runs=table_runs("canonical_bars"),
        spec=lambda wc: table_spec("canonical_bars"),
    script:
        "../workflow_scripts/make_figure.py"


rule figure_cv_vs_f1:
    input:
        scores=score_files(table_runs("cv_vs_f1")),
        published=config["published"]["hermes_table2"],
    output:
        report(
            f"{OUT}/report/figures/cv_vs_f1.png",
            caption="../reports/cv_vs_f1.rst",
            category="Figures",
            labels={"figure": "cv_vs_f1"},
        ),
    log:
        f"{OUT}/logs/figures/cv_vs_f1.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="cv_vs_f1",
        runs=table_runs("cv_vs_f1"),
        spec=lambda wc: table_spec("cv_vs_f1"),
    script:
        "../workflow_scripts/make_figure.py"


rule figure_timing:
    input:
        scores=score_files(table_runs("timing")),
    output:
        report(
            f"{OUT}/report/figures/timing.png",
            caption="../reports/timing.rst",
            category="Figures",
            labels={"figure": "timing"},
        ),
    log:
        f"{OUT}/logs/figures/timing.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="timing",
        runs=table_runs("timing"),
        spec=lambda wc: table_spec("timing"),
    script:
        "../workflow_scripts/make_figure.py"


rule figure_history_drawing:
    input:
        history=lambda wc: history(EXPERIMENTS["canonical"]["drawing"]),
        predictions=lambda wc: [
            prediction(*run) for run in FIGURE_RUNS["history_drawing"]
        ],
    output:
        report(
            f"{OUT}/report/figures/history_drawing.png",
            caption="../reports/history_drawing.rst",
            category="Figures",
            labels={"figure": "history_drawing"},
        ),
    log:
        f"{OUT}/logs/figures/history_drawing.log",
    conda:
        "../envs/battus.yaml"
    params:
        figure="history_drawing",
        runs=lambda wc: FIGURE_RUNS["history_drawing"],
        spec=lambda wc: table_spec("history_drawing"),
    script:
        "../workflow_scripts/make_figure.py"
