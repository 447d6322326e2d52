"""Stage 3: what the report needs besides the tables and figures.

report_spec writes what one table or figure shows (its spec and runs, battus.suite.report's
registry) to a small JSON file, the input of its rule: the spec is a param of this rule, so
editing one experiment rewrites only its items' spec files and remakes only their tables and
figures, while the table and figure rules keep short params (the HTML report prints a rule's
params in the information panel of each of its outputs). It is a script, not a `run:` block:
Snakemake starts a `run:` job as a second Snakemake that parses the whole workflow again.
run_summary writes the report's first
page (battus.suite.report.summary), which reports/workflow.rst includes.
"""


localrules:
    report_spec,


wildcard_constraints:
    item=alternatives([*TABLES, *FIGURES, "summary"]),


rule report_spec:
    output:
        item_spec_file("{item}"),
    log:
        f"{OUT}/logs/report/spec/{{item}}.log",
    conda:
        "../envs/battus.yaml"
    params:
        spec=lambda wildcards: item_spec(wildcards.item)["spec"],
        runs=lambda wildcards: item_spec(wildcards.item)["runs"],
    script:
        "../workflow_scripts/write_item_spec.py"


rule run_summary:
    input:
        **(
            {"canonical": table_file("canonical_quality", "csv")}
            if "canonical_quality" in TABLES
            else {}
        ),
        spec=item_spec_file("summary"),
        histories=[history(d) for d in dict.fromkeys(d for d, _, _ in PLAN.all_runs())],
        scores=scores_file(),
        # made last: the wall time runs to the last table or figure
        finished=[table_file(t, ext) for t in TABLES for ext in ("csv", "html")]
        + [figure_file(f) for f in FIGURES],
    output:
        rst=summary_file("rst"),
        html=report(
            summary_file("html"),
            caption="../reports/summary.rst",
            category="About this run",
        ),
    log:
        f"{OUT}/logs/report/summary.log",
    conda:
        "../envs/battus.yaml"
    resources:
        **cluster_resources(),
    params:
        workflow=workflow.basedir,
    script:
        "../workflow_scripts/make_run_summary.py"
