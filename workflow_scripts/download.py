"""Rule download: fetch one file (or copy it from the mirror) and check its sha256.

The log, beside the download (resources/downloads/<path>.log, shared by every
configuration like the download itself), is the file's provenance: the URL it
stands for, where the bytes came from (that URL, a mirror file or a file kept
with the workflow) and their sha256. Any failure is one line there and on the
terminal, exit status 2; only the fetcher retries, and only transient failures.
"""

import os
import sys
import urllib.parse
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import prepare_outputs, setup_log  # noqa: E402

from battus.download import fetch, find_in_mirror  # noqa: E402
from battus.errors import InputError  # noqa: E402
from battus.io import sha256_file  # noqa: E402

sm = snakemake  # noqa: F821
log = setup_log(sm)
prepare_outputs(sm)
key = sm.wildcards.path
url = sm.params.url
mirror = os.environ.get("BATTUS_MIRROR") or sm.config.get("mirror") or None
relative = key
log.info("url %s", url)
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
    log.info("mirror %s: copying %s", mirror, find_in_mirror(mirror, key) or f"{key} (no copy there)")
else:
    log.info("downloading %s", url)
try:
    path = fetch(url, sm.output[0], sha256=sm.params.sha256, mirror=mirror, relative=relative,
                 overwrite=True, progress=False)
except InputError as exc:
    log.error("battus: error: %s", exc)
    sys.exit(2)
digest = sha256_file(path)
log.info("sha256 %s %s%s", digest, path, "" if sm.params.sha256 else " (no checksum configured: record it)")
