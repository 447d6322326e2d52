"""Rule download: fetch one file (or copy it from the mirror) and check its sha256."""

import os
import sys
import urllib.parse
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.download import fetch  # noqa: E402
from battus.io import sha256_file  # noqa: E402

log = setup_log(snakemake)  # noqa: F821
prepare_outputs(snakemake)  # noqa: F821
sm = snakemake  # noqa: F821
key = sm.wildcards.path
url = sm.params.url
mirror = os.environ.get("BATTUS_MIRROR") or sm.config.get("mirror") or None
relative = key
if url.startswith("file:"):
    # a file kept with the workflow (file:relative/path, relative to the workflow's folder,
    # or file:///absolute/path): copied and checked like a mirror copy, never looked up in the mirror
    local = Path(urllib.parse.unquote(urllib.parse.urlparse(url).path))
    if not local.is_absolute():
        local = Path(__file__).resolve().parent.parent / local
    mirror, relative = str(local.parent), local.name
    log.info("copying %s", local)
elif mirror:
    # a mirror laid out like resources/downloads (ditto/..., snap/...), or one source's folder
    root = Path(mirror)
    for candidate in (key, key.split("/", 1)[-1]):
        if (root / candidate).is_file():
            relative = candidate
            break
    log.info("mirror %s: copying %s", mirror, root / relative)
else:
    log.info("downloading %s", sm.params.url)
path = fetch(url, sm.output[0], sha256=sm.params.sha256, mirror=mirror, relative=relative,
             overwrite=True, progress=False)
digest = sha256_file(path)
log.info("sha256 %s %s%s", digest, path, "" if sm.params.sha256 else " (no checksum configured: record it)")
