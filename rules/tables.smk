"""Stage 3: the paper's tables as CSV, Markdown, LaTeX (booktabs) and HTML under <results>/report/tables.

One rule per table, all made by this loop: its entry in battus.suite.report's registry says
what it shows (its spec file, written by rule report_spec: editing one experiment reruns only
its tables) and which files it reads (report_inputs). The HTML report lists each table's HTML
page (the paper's wide layout, shown by its eye icon) with its long CSV on the next row
(one label each: two values of a second label would become a toggle that hides the CSV).
"""

for table in TABLES:

    rule:
        name:
            f"table_{table}"
        input:
            **report_inputs(table),
            spec=item_spec_file(table),
        output:
            csv=report(
                table_file(table, "csv"),
                caption=f"../reports/{table}.rst",
                category="Tables",
                labels={"table": f"{table} (long CSV)"},
            ),
            md=table_file(table, "md"),
            tex=table_file(table, "tex"),
            html=report(
                table_file(table, "html"),
                caption=f"../reports/{table}.rst",
                category="Tables",
                labels={"table": table},
            ),
        log:
            f"{OUT}/logs/tables/{table}.log",
        conda:
            "../envs/battus.yaml"
        resources:
            **cluster_resources(),
        params:
            name=table,
        script:
            "../workflow_scripts/make_report_item.py"


rule scores_csv:
    input:
        [score(*run) for run in PLAN.all_runs()],
    output:
        report(scores_file(), caption="../reports/scores.rst", category="Scores"),
    log:
        f"{OUT}/logs/tables/scores.log",
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
    params:
        runs=PLAN.all_runs(),
        seeds={d: PLAN.seed_of(d) for d in PLAN.simulated()},
        # a dataset simulated at another seed is written under the dataset it repeats
        replicates={
            d: PLAN.base_dataset(d) for d in DATASETS if PLAN.base_dataset(d) != d
        },
    script:
        "../workflow_scripts/make_scores_csv.py"
