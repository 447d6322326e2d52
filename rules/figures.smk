"""Stage 3: figures (PNG) under <results>/report/figures.

One rule per figure, all made by this loop, as for the tables (its spec file an input).
"""

for figure in FIGURES:

    rule:
        name:
            f"figure_{figure}"
        input:
            **report_inputs(figure),
            spec=item_spec_file(figure),
        output:
            report(
                figure_file(figure),
                caption=f"../reports/{figure}.rst",
                category="Figures",
                labels={"figure": figure},
            ),
        log:
            f"{OUT}/logs/figures/{figure}.log",
        conda:
            "../envs/battus.yaml"
        resources:
            **cluster_resources(),
        params:
            name=figure,
        script:
            "../workflow_scripts/make_report_item.py"
