"""Rule archive: one tarball that reruns, with a sha256 manifest of every file.

Inside ``<name>/``:

* the code at the exact commit: ``git archive HEAD`` of Snakefile, rules/,
  workflow_scripts/, src/, envs/, profiles/, config/, data/, reports/, docs/,
  pyproject.toml, README.md (``ARCHIVE.json`` records the commit and whether
  the tree was dirty; uncommitted changes are in ``code-uncommitted.diff``);
* ``config-used.yaml``: the config file the run was given (the embedded
  default when none);
* the configuration's results (graphs, histories, predictions, scores,
  tables, figures, logs, benchmarks) and the downloads they were made from;
* ``report.html``, rebuilt from those results by ``snakemake --report``;
* ``environment/``: ``pip freeze`` and the Python version;
* ``MANIFEST.sha256`` (``sha256sum -c MANIFEST.sha256`` checks it).

Rerun in the unpacked folder: ``snakemake -n --configfile config-used.yaml``
reports nothing to do (tar keeps the modification times).
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
out = Path(sm.output[0])
base = Path(sm.params.basedir)
exclude = [Path(p) for p in sm.params.exclude] + [out]
log_file = Path(sm.log[0]).resolve()
CODE = ("Snakefile", "rules/", "workflow_scripts/", "src/", "envs/", "profiles/", "config/", "data/",
        "reports/", "docs/", "pyproject.toml", "README.md", "LICENSE", "CITATION.cff")
now = datetime.now(UTC)


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(base), *args], capture_output=True, check=False)


def wanted(path: Path) -> bool:
    if path.resolve() == log_file or path.name.startswith(".") or path.name.endswith(".tmp"):
        return False
    return not any(path == e or e in path.parents for e in exclude)


# -- the code: git archive HEAD (exactly the commit), else the files on disk
members: dict[str, tuple[bytes, float]] = {}  # archive path -> (data, mtime)
modes: dict[str, int] = {}  # executable files
commit = git("rev-parse", "HEAD")
if commit.returncode == 0:
    head = commit.stdout.decode().strip()
    tracked = git("ls-tree", "-r", "--name-only", "HEAD").stdout.decode().splitlines()
    paths = [p for p in tracked if p.startswith(CODE) or p in CODE]
    code_tar = subprocess.run(["git", "-C", str(base), "archive", "--format=tar", "HEAD", "--", *paths],
                              capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(code_tar)) as tar:
        for info in tar.getmembers():
            if info.isfile():
                members[info.name] = (tar.extractfile(info).read(), info.mtime)
                modes[info.name] = info.mode
    status = git("status", "--porcelain", "--untracked-files=no", "--", *paths).stdout.decode()
    dirty = bool(status.strip())
    if dirty:
        diff = git("diff", "HEAD", "--", *paths).stdout
        members["code-uncommitted.diff"] = (diff, now.timestamp())
        log.warning("the working tree differs from %s; packed the commit, the changes in code-uncommitted.diff",
                    head[:12])
else:
    head, dirty, status = None, None, ""
    for name in CODE:
        root = base / name
        for p in sorted(root.rglob("*") if root.is_dir() else [root]):
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc"):
                members[p.relative_to(base).as_posix()] = (p.read_bytes(), p.stat().st_mtime)
    log.warning("%s is not a git checkout: packed the code files on disk, commit unknown", base)

# -- the config used
configfiles = [Path(p) for p in sm.params.configfiles] or [base / "config/config.yaml"]
if len(configfiles) == 1:
    members["config-used.yaml"] = (configfiles[0].read_bytes(), configfiles[0].stat().st_mtime)
else:  # several --configfile: the effective config (Snakemake merges them in order)
    import yaml

    members["config-used.yaml"] = (yaml.safe_dump(dict(sm.config), sort_keys=False).encode(), now.timestamp())

# -- results and the downloads they came from, with their modification times
files = sorted({p for root in [*sm.params.results, *sm.params.downloads] if Path(root).exists()
                for p in (Path(root).rglob("*") if Path(root).is_dir() else [Path(root)])
                if p.is_file() and wanted(p)})
for p in files:
    members[p.as_posix()] = (p.read_bytes(), p.stat().st_mtime)

# -- a report rebuilt from these results (not whatever report.html lies around)
with tempfile.TemporaryDirectory() as tmp:
    report = Path(tmp) / "report.html"
    cmd = [sys.executable, "-m", "snakemake", "-s", str(base / "Snakefile"), "--nolock", "--report", str(report)]
    for c in sm.params.configfiles:
        cmd += ["--configfile", str(c)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not report.is_file():
        raise RuntimeError(f"snakemake --report failed ({proc.returncode}): {proc.stderr[-2000:]}")
    members["report.html"] = (report.read_bytes(), now.timestamp())
log.info("rebuilt report.html from the results (%d bytes)", len(members["report.html"][0]))

# -- environment and provenance
freeze = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
members["environment/pip-freeze.txt"] = (freeze.encode(), now.timestamp())
members["environment/python.txt"] = (f"{sys.version}\n".encode(), now.timestamp())
record = {
    "name": sm.config["name"],
    "commit": head,
    "dirty": dirty,
    "dirty_files": status.splitlines(),
    "created": now.isoformat(timespec="seconds"),
    "config_used": "config-used.yaml",
    "rerun": "snakemake --cores all --configfile config-used.yaml   # in this folder: nothing to do",
    "verify": "sha256sum -c MANIFEST.sha256",
}
members["ARCHIVE.json"] = ((json.dumps(record, indent=2) + "\n").encode(), now.timestamp())
manifest = "".join(f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, (data, _) in sorted(members.items()))
members["MANIFEST.sha256"] = (manifest.encode(), now.timestamp())

prefix = out.name.removesuffix(".tar.gz")
tmp = out.with_name(f".{out.name}.tmp")
out.parent.mkdir(parents=True, exist_ok=True)
with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
    for name, (data, mtime) in sorted(members.items()):
        info = tarfile.TarInfo(f"{prefix}/{name}")
        info.size = len(data)
        info.mtime = mtime
        info.mode = modes.get(name, 0o644)
        tar.addfile(info, io.BytesIO(data))
os.replace(tmp, out)
log.info("packed %d files (commit %s%s) into %s", len(members), head or "unknown", ", dirty" if dirty else "", out)
