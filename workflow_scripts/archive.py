"""Rule archive: pack config, results, report, `pip freeze`, logs and a sha256 manifest."""

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
out = Path(sm.output[0])
exclude = [Path(p) for p in sm.params.exclude] + [out]
log_file = Path(sm.log[0]).resolve()


def wanted(path: Path) -> bool:
    if path.resolve() == log_file or path.name.startswith("."):
        return False
    return not any(path == e or e in path.parents for e in exclude)


files = sorted(p for root in sm.params.include if Path(root).exists()
               for p in (Path(root).rglob("*") if Path(root).is_dir() else [Path(root)])
               if p.is_file() and wanted(p))
files += [p for p in (Path("Snakefile"), Path("pyproject.toml")) if p.is_file()]
freeze = subprocess.run([sys.executable, "-m", "pip", "freeze"], capture_output=True, text=True).stdout
extra = {
    "environment/pip-freeze.txt": freeze.encode(),
    "environment/python.txt": f"{sys.version}\n".encode(),
    "environment/created.txt": f"{datetime.now(UTC).isoformat(timespec='seconds')}\n".encode(),
}
manifest = []
for p in files:
    manifest.append(f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.as_posix()}")
for name, data in extra.items():
    manifest.append(f"{hashlib.sha256(data).hexdigest()}  {name}")
extra["MANIFEST.sha256"] = ("\n".join(manifest) + "\n").encode()
prefix = out.name.removesuffix(".tar.gz")
tmp = out.with_name(f".{out.name}.tmp")
out.parent.mkdir(parents=True, exist_ok=True)
with tarfile.open(tmp, "w:gz") as tar:
    for p in files:
        tar.add(p, arcname=f"{prefix}/{p.as_posix()}", recursive=False)
    for name, data in extra.items():
        info = tarfile.TarInfo(f"{prefix}/{name}")
        info.size = len(data)
        info.mtime = int(datetime.now(UTC).timestamp())
        tar.addfile(info, io.BytesIO(data))
os.replace(tmp, out)
log.info("packed %d files (+ environment, manifest) into %s", len(files), out)
