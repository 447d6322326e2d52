"""report_spec: a table's or figure's spec and runs (the rule's params) -> its small JSON file."""

from battus.suite.specfile import write_item_spec

sm = snakemake  # noqa: F821
write_item_spec(sm.output[0], sm.params.spec, sm.params.runs, log=sm.log[0])
