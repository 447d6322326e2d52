"""Battus workflow: from downloads to the paper's tables, figures and HTML report.

    snakemake --cores 2                          # embedded default (offline, minutes)
    snakemake --cores 2 --configfile config/paper.yaml   # the whole paper
    snakemake --report results/report/report.html        # HTML report afterwards

See docs/workflow.md for reruns, SLURM, the mirror and archiving.
"""

from snakemake.utils import min_version

from battus.suite.config import check_config_files, refused_in_one_line

min_version("8.0")


# The embedded default, unless --configfile names another (no deep merge with it).
# Checked first (UTF-8, YAML, no key twice): Snakemake's own reader shows a file that is not
# UTF-8 as a traceback. A --configfile was read by Snakemake before this file runs; see
# docs/robustness.md.
if not workflow.overwrite_configfiles:
    with refused_in_one_line():
        check_config_files([f"{workflow.basedir}/config/config.yaml"])

    configfile: f"{workflow.basedir}/config/config.yaml"


report: "reports/workflow.rst"


include: "rules/common.smk"
include: "rules/data.smk"
include: "rules/reconstruct.smk"
include: "rules/tables.smk"
include: "rules/figures.smk"
include: "rules/report.smk"
include: "rules/archive.smk"


rule all:
    default_target: True
    input:
        report_targets(),
