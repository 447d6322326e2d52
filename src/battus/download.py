"""Downloads with checksums, or copies from a local mirror folder.

Every input of the paper comes from two places: the SNAP collection
(``https://snap.stanford.edu/data/``) and the DITTO repository at a pinned
commit (:data:`DITTO_BASE`). :func:`fetch` gets one file, from a mirror folder
when one is given (argument ``mirror`` or environment variable
``BATTUS_MIRROR``) and from the network otherwise, and always writes through a
temporary file renamed into place, so an interrupted fetch leaves nothing.
"""

from __future__ import annotations

import http.client
import os
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from . import __version__
from .errors import InputError
from .io import atomic_path, sha256_file

MIRROR_ENV = "BATTUS_MIRROR"
DOWNLOADS = "resources/downloads"  # the workflow's download folder, relative to its run folder
SNAP_BASE = "https://snap.stanford.edu/data/"
DITTO_BASE = (
    "https://github.com/q-rz/KDD23-DITTO/raw/339f2d56be45917ac4d5a4cde33b773c81070fac/input/"
)
_BLOCK = 1 << 20


@dataclass(frozen=True)
class SnapDataset:
    """One SNAP graph and the size the paper reports after preprocessing."""

    name: str
    file: str
    directed: bool
    n: int  # vertices in the largest weakly connected component
    edges: int  # arcs (directed) or undirected edges, self-loops and duplicates out
    sha256: str | None = None

    @property
    def url(self) -> str:
        return SNAP_BASE + self.file


# Sizes are the paper's dataset table (tab:datasets). The large files were not
# available offline, so their sha256 is left None (fill in after the first
# verified download). Oregon2's checksum is that of the copy in the shared
# mirror (../shared/data/snap), which read_edgelist turns into exactly the
# canonical DITTO Oregon2 graph (11,461 vertices, 32,730 edges).
# Note on LiveJournal: SNAP's page lists 68,983,820 edges in the largest WCC,
# counting self-loops and duplicate lines; KONECT lists 68,475,391 distinct
# non-loop arcs for the whole graph, so the paper's 68,466,754 is consistent
# with our preprocessing but has not been checked here.
SNAP_DATASETS: dict[str, SnapDataset] = {
    "web-stanford": SnapDataset("web-stanford", "web-Stanford.txt.gz", True, 255_265, 2_234_572),
    "web-google": SnapDataset("web-google", "web-Google.txt.gz", True, 855_802, 5_066_842),
    "orkut": SnapDataset("orkut", "com-orkut.ungraph.txt.gz", False, 3_072_441, 117_185_083),
    "livejournal": SnapDataset(
        "livejournal", "soc-LiveJournal1.txt.gz", True, 4_843_953, 68_466_754
    ),
    "oregon2": SnapDataset(
        "oregon2", "oregon2_010526.txt.gz", False, 11_461, 32_730,
        sha256="be333efed3c6f06274bfade8cf6bce8ff858a3ac364bee8c5b6fbd0382e7e70e",
    ),
}

# Canonical HERMES suite: dataset name -> path relative to DITTO_BASE (and to a
# mirror folder laid out like ../shared/data/ditto).
DITTO_FILES: dict[str, str] = {
    "ba-si": "synthetic/ba-si.pt",
    "ba-sir": "synthetic/ba-sir.pt",
    "er-si": "synthetic/er-si.pt",
    "er-sir": "synthetic/er-sir.pt",
    "oregon2-si": "oregon2/oregon2-si.pt",
    "oregon2-sir": "oregon2/oregon2-sir.pt",
    "prost-si": "prost/prost-si.pt",
    "prost-sir": "prost/prost-sir.pt",
    "farmers-si": "farmers/farmers-si.pt",
    "covid-sir": "covid/covid-sir.pt",
    "heb-sir": "heb/heb-sir.pt",
    "pol-si": "pol/rt-pol.txt",
}

# sha256 of the copies in the shared mirror (../shared/data/ditto). The URLs
# pin a commit, so these should equal the GitHub files byte for byte, but that
# was not checked against the network here.
DITTO_SHA256: dict[str, str] = {
    "synthetic/ba-si.pt": "6491d7f85a0a85424a51ecae34a8a0577affecdf86e5c60dfb8f7c38b7a77e55",
    "synthetic/ba-sir.pt": "2d388efd6865bba84685934c80ac55c1cb358c9ada5ece5934dea879551f227b",
    "synthetic/er-si.pt": "f8a6ea6ccf9d21a3955482167157ba113633f0bafa0fb0917486baa857b565c1",
    "synthetic/er-sir.pt": "71c1edf9f343bea4217260247a959599fef9fa199705a755da35289ebfbd5e67",
    "oregon2/oregon2-si.pt": "04d6c8f38f5f12000e1e3373b9f4032f0905f2641da148233b8a87aa190c3b28",
    "oregon2/oregon2-sir.pt": "3a6925665d8c9b80a27730a2240e4967c9436360609290362751943082d889ff",
    "prost/prost-si.pt": "60ce5ed1eb3b34ab5dbc287358b42135b2e002ed30f9deb3ea14144f975268dc",
    "prost/prost-sir.pt": "67c5f62ec1e08b5e2c12c228b52f3a3a8ec8f16be1b38e06cda67023716b629a",
    "farmers/farmers-si.pt": "aac54ed82a6c6ca8577cd7d912df9ce1e1b65c6d36519451e8939d03244ec3eb",
    "covid/covid-sir.pt": "2eb4fb7d46fcb5680bb4034a577a3a652bb475202230b0ea1d6d6d3b54063ee7",
    "heb/heb-sir.pt": "943ff7b3cd09fa2b011f7e5dfe7deaae713d1b0bb45442c305c7249bdae1ecf7",
    "pol/rt-pol.txt": "41baed847075d492cd78e8e0a8a5aaf2be02b8b02257c13cf41b389e37db7f8a",
}


def ditto_url(relative: str) -> str:
    return DITTO_BASE + relative


def mirror_candidates(mirror_root: str | Path, relative: str) -> list[Path]:
    """Where a mirror may hold ``relative``, in order: laid out like resources/downloads
    (``ditto/synthetic/ba-si.pt``), as one source's folder (``synthetic/ba-si.pt``), or flat
    (``ba-si.pt``)."""
    root = Path(mirror_root)
    relative = PurePosixPath(str(relative).lstrip("/"))
    tails = [relative, PurePosixPath(*relative.parts[1:]) if len(relative.parts) > 1 else relative,
             PurePosixPath(relative.name)]
    return [root / tail for tail in dict.fromkeys(tails)]


def find_in_mirror(mirror_root: str | Path, relative: str) -> Path | None:
    """The first of :func:`mirror_candidates` that is a file, or None."""
    return next((c for c in mirror_candidates(mirror_root, relative) if c.is_file()), None)


def mirror_path(mirror_root: str | Path, relative: str) -> Path:
    """The mirror copy of ``relative`` (see :func:`mirror_candidates`).

    Raises :class:`InputError` naming every candidate when none exists.
    """
    found = find_in_mirror(mirror_root, relative)
    if found is None:
        tried = " or ".join(str(c) for c in mirror_candidates(mirror_root, relative))
        raise InputError(mirror_root, "mirror", f"no copy of {str(relative)!r} (tried {tried})")
    return found


def copied_from_mirror(downloads: dict[str, dict], key: str, folder: str | Path = DOWNLOADS) -> str | None:
    """What a download job for ``key`` copies from a mirror (the path ``key``), or None when it
    uses no mirror: its URL is a file kept with the workflow (``file:``), or ``folder/key`` is
    already downloaded, so the job will not run."""
    if str(downloads[key]["url"]).startswith("file:") or (Path(folder) / key).is_file():
        return None
    return key


def mirror_shortfall(mirror_root: str | Path, downloads: dict[str, dict], keys: Iterable[str],
                     folder: str | Path = DOWNLOADS) -> str | None:
    """One message naming the mirror folder and every one of ``keys`` (keys of ``downloads``,
    those a run reads) that would be copied from it and that it lacks; None when it lacks none."""
    copies = {copy for key in keys if (copy := copied_from_mirror(downloads, key, folder))}
    missing = sorted(c for c in copies if find_in_mirror(mirror_root, c) is None)
    if not missing:
        return None
    root = Path(mirror_root)
    where = f"mirror {root}" + ("" if root.is_dir() else " (no such folder)")
    return (f"{where} lacks {len(missing)} of the {len(copies)} files this run would copy from it: "
            f"{', '.join(missing)}. Put them there (paths as under {folder}/), or unset "
            f"BATTUS_MIRROR and `mirror:` to download them.")


def _url_name(url: str) -> str:
    name = PurePosixPath(urllib.parse.unquote(urllib.parse.urlparse(url).path)).name
    if not name:
        raise InputError(url, "url", "the URL names no file")
    return name


def _verify(path: Path, sha256: str | None, label: str | Path) -> None:
    if sha256 is None:
        return
    actual = sha256_file(path)
    if actual.lower() != sha256.lower():
        raise InputError(label, "sha256", f"checksum mismatch: expected {sha256}, got {actual}")


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.1f} {unit}" if unit != "B" else f"{int(nbytes)} B"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"


class TransientError(Exception):
    """A download failure that may pass on its own: a 5xx, 408 or 429 answer, a refused, reset or
    timed-out connection, a body cut short. Only these are retried, and only by :func:`fetch`:
    a 404, a checksum mismatch or a full disk fails at once, and the workflow adds no retries."""


# "Try again later" statuses; every other 4xx says the request itself is wrong and stays wrong.
_RETRY_STATUSES = {408, 429}
# Opening errors that no retry cures: a file: URL that names nothing, a certificate that fails.
_FINAL_OPEN_ERRORS = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError,
                      ssl.SSLCertVerificationError)


def _open_failure(url: str, exc: Exception) -> Exception:
    """The exception to raise for a failure to open ``url``: TransientError or a final InputError."""
    if isinstance(exc, urllib.error.HTTPError):
        text = f"HTTP {exc.code} {exc.reason}"
        return TransientError(text) if exc.code >= 500 or exc.code in _RETRY_STATUSES else (
            InputError(url, "download", text))
    reason = getattr(exc, "reason", exc)
    if isinstance(reason, str) or isinstance(reason, _FINAL_OPEN_ERRORS):  # 'unknown url type', ...
        return InputError(url, "download", str(reason))
    return TransientError(str(reason) or type(reason).__name__)


def _download(url: str, dest: Path, tmp: Path, name: str, progress: bool) -> None:
    """Write the body of ``url`` into ``tmp``; raises TransientError or InputError (see there)."""
    request = urllib.request.Request(url, headers={"User-Agent": f"battus/{__version__}"})
    try:
        response = urllib.request.urlopen(request, timeout=60)
    except (OSError, http.client.HTTPException) as exc:  # URLError and HTTPError are OSErrors
        raise _open_failure(url, exc) from None
    try:
        with response, open(tmp, "wb") as out:
            done = _copy_body(response, out, name, progress)
    except OSError as exc:  # reading errors became TransientError inside: this is writing (ENOSPC, EDQUOT)
        raise InputError(dest, "download", f"cannot write ({exc.strerror or exc}); nothing kept") from None
    if progress:
        print(f"\r{name}: {_human(done)} done", file=sys.stderr, flush=True)


def _copy_body(response, out, name: str, progress: bool) -> int:
    total = response.headers.get("Content-Length")
    total = int(total) if total and total.isdigit() else None
    done = 0
    last = 0.0
    while True:
        try:
            block = response.read(_BLOCK)
        except (OSError, http.client.HTTPException) as exc:  # reset, timeout, IncompleteRead
            raise TransientError(f"connection lost after {_human(done)} ({exc!r})") from None
        if not block:
            break
        out.write(block)
        done += len(block)
        now = time.monotonic()
        if progress and now - last > 0.5:
            last = now
            share = f" ({100 * done / total:.0f}%)" if total else ""
            of = f" / {_human(total)}" if total else ""
            print(f"\r{name}: {_human(done)}{of}{share}", end="", file=sys.stderr, flush=True)
    if total is not None and done != total:
        raise TransientError(f"got {done} of {total} bytes")
    return done


def fetch(
    url: str,
    dest: str | Path,
    *,
    sha256: str | None = None,
    mirror: str | Path | None = None,
    relative: str | None = None,
    retries: int = 3,
    progress: bool = True,
    overwrite: bool = False,
) -> Path:
    """Fetch ``url`` to ``dest`` and return the file's path.

    ``dest`` is the file to write, or a folder (an existing one, or any path
    ending in ``/``) that receives the file under the URL's name.

    With a mirror (``mirror``, else the ``BATTUS_MIRROR`` environment
    variable) nothing is downloaded: the file is copied from
    :func:`mirror_path` of ``relative`` (default: the URL's file name), and a
    missing copy is an error. Otherwise ``url`` is downloaded with urllib in
    at most ``retries`` attempts: only a :class:`TransientError` is retried,
    a 4xx answer, a checksum mismatch or a failed write fails at once. Either
    way the data goes to a temporary file beside ``dest``, is checked against
    ``sha256`` when given
    (a mismatch raises :class:`InputError` naming the file and 'sha256' and
    leaves nothing behind) and is then renamed into place. An existing
    ``dest`` is kept when it matches ``sha256`` (or no checksum is given)
    unless ``overwrite``.
    """
    name = _url_name(url)
    folder = str(dest).endswith(("/", os.sep))
    dest = Path(dest)
    if folder or dest.is_dir():
        dest = dest / name
    if dest.is_file() and not overwrite:
        if sha256 is None or sha256_file(dest).lower() == sha256.lower():
            return dest
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    if mirror is not None:
        source = mirror_path(mirror, relative if relative is not None else name)
        with atomic_path(dest) as tmp:
            try:
                shutil.copyfile(source, tmp)
            except OSError as exc:  # a full disk, an unreadable copy: no retry cures either
                raise InputError(source, "mirror", f"cannot copy to {dest} ({exc.strerror or exc})") from None
            _verify(tmp, sha256, source)
        return dest
    attempts = max(1, int(retries))
    for attempt in range(1, attempts + 1):
        try:
            with atomic_path(dest) as tmp:
                _download(url, dest, tmp, name, progress)
                _verify(tmp, sha256, url)
            return dest
        except TransientError as exc:  # an InputError (404, checksum, disk full) is final: not caught
            if attempt == attempts:
                raise InputError(url, "download", f"failed after {attempts} attempts ({exc})") from None
            error = str(exc)
        if progress:
            print(f"\n{name}: attempt {attempt} failed ({error}); retrying", file=sys.stderr)
        time.sleep(min(2 ** (attempt - 1), 30))
    raise AssertionError("unreachable")


def fetch_snap(
    key: str, dest: str | Path, *, mirror: str | Path | None = None, **kwargs
) -> Path:
    """Fetch one of :data:`SNAP_DATASETS` by key (checksummed where one is recorded)."""
    if key not in SNAP_DATASETS:
        raise InputError(key, "dataset", f"unknown SNAP dataset; known: {', '.join(SNAP_DATASETS)}")
    ds = SNAP_DATASETS[key]
    return fetch(ds.url, dest, sha256=ds.sha256, mirror=mirror, relative=ds.file, **kwargs)


def fetch_ditto(
    relative: str, dest: str | Path, *, mirror: str | Path | None = None, **kwargs
) -> Path:
    """Fetch one canonical DITTO export (``relative`` as in :data:`DITTO_FILES`)."""
    return fetch(
        ditto_url(relative), dest, sha256=DITTO_SHA256.get(relative), mirror=mirror,
        relative=relative, **kwargs,
    )
