"""Stage 4: one tarball with config, results, report, environment, logs and a sha256 manifest."""


localrules:
    archive,


rule archive:
    input:
        report_targets(),
    output:
        f"{OUT}/archive/{config['name']}.tar.gz",
    log:
        f"{OUT}/logs/archive.log",
    conda:
        "../envs/battus.yaml"
    params:
        include=archive_paths(),
        exclude=[f"{OUT}/archive"],
    script:
        "../workflow_scripts/archive.py"
