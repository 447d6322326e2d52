"""Stage 4: the artifact behind a paper, one tarball that reruns.

Code at the exact commit (git archive HEAD), the config used, the results, the
downloads they came from, a report rebuilt from those results, `pip freeze`,
the commit and a sha256 manifest of every file (workflow_scripts/archive.py).
"""


localrules:
    archive,


# the downloads this configuration reads (edge lists and imported exports)
ARCHIVE_DOWNLOADS = [
    downloaded(k)
    for k in dict.fromkeys(
        [PLAN.graphs[g]["download"] for g in PLAN.edgelist_graphs()]
        + [DATASETS[d]["import"] for d in PLAN.imported()]
    )
]


rule archive:
    input:
        report_targets(),
        ARCHIVE_DOWNLOADS,
    output:
        f"{OUT}/archive/{config['name']}.tar.gz",
    log:
        f"{OUT}/logs/archive.log",
    conda:
        "../envs/battus.yaml"
    params:
        results=[p for p in archive_paths() if p.startswith(f"{OUT}/")],
        # with their logs: the URL or mirror file each came from, and its sha256
        downloads=ARCHIVE_DOWNLOADS + [f"{d}.log" for d in ARCHIVE_DOWNLOADS],
        exclude=[f"{OUT}/archive"],
        configfiles=[str(p) for p in workflow.overwrite_configfiles],
        basedir=workflow.basedir,
    script:
        "../workflow_scripts/archive.py"
