"""Reading edge-list files: SNAP ``.txt``/``.txt.gz`` and CSV.

Parsing only: the file becomes two int64 arrays of raw vertex ids, which
:func:`battus.graph.graph_from_raw_arcs` cleans (self-loops, duplicates,
symmetrization, largest weakly connected component, relabelling). The fast
path is pandas' C parser in chunks; only after it fails is the file walked
line by line to name the first malformed line.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import InputError
from .files import require_file
from .graph import Graph, graph_from_raw_arcs

_CHUNK_ROWS = 1 << 23  # rows per pandas chunk (8M rows, ~128 MB of int64 pairs)
_GZIP_MAGIC = b"\x1f\x8b"


def _open_text(path: Path):
    """Open a plain or gzip text file for the line-by-line diagnosis."""
    with open(path, "rb") as fh:
        gz = fh.read(2) == _GZIP_MAGIC
    if gz:
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def _data_line(raw: str) -> str:
    return raw.split("#", 1)[0].strip()


def _split(line: str, fmt: str) -> list[str]:
    if fmt == "csv":
        return [f.strip().strip('"').strip("'").strip() for f in line.split(",")]
    return line.split()


def _is_int(token: str) -> bool:
    try:
        value = int(token)
    except ValueError:
        return False
    return -(2**63) <= value < 2**63


def _first_data_line(path: Path) -> tuple[int, str] | None:
    """(1-based line number, text) of the first non-comment, non-blank line."""
    with _open_text(path) as fh:
        for number, raw in enumerate(fh, start=1):
            line = _data_line(raw)
            if line:
                return number, line
    return None


def _diagnose(path: Path, fmt: str, skip: int, fallback: str) -> InputError:
    """Find the first malformed line (slow path, used only after a parse failure)."""
    try:
        return _first_bad_line(path, fmt, skip, fallback)
    except (OSError, EOFError, zlib.error) as exc:
        return InputError(path, "gzip", f"unreadable gzip data ({exc})")


def _first_bad_line(path: Path, fmt: str, skip: int, fallback: str) -> InputError:
    with _open_text(path) as fh:
        for number, raw in enumerate(fh, start=1):
            if number <= skip:
                continue
            line = _data_line(raw)
            if not line:
                continue
            fields = _split(line, fmt)
            if len(fields) < 2 or not fields[1]:
                return InputError(
                    path, "columns", f"line {number}: expected two vertex ids, got {line[:60]!r}"
                )
            for token in fields[:2]:
                if not _is_int(token):
                    return InputError(
                        path, "vertex id", f"line {number}: {token[:40]!r} is not a 64-bit integer"
                    )
    return InputError(path, "edges", fallback)


def _detect_format(path: Path, first: str) -> str:
    stem = path.name[:-3] if path.name.endswith(".gz") else path.name
    if stem.lower().endswith(".csv"):
        return "csv"
    return "csv" if "," in first else "snap"


def read_edgelist(
    path: str | Path,
    *,
    directed: bool,
    fmt: str = "auto",
    keep_largest_component: bool = True,
    name: str | None = None,
    relabel: str = "appearance",
) -> Graph:
    """Read a SNAP-style or CSV edge list into an in-neighbour CSR :class:`Graph`.

    ``fmt='snap'``: ``.txt`` or ``.txt.gz``, ``#`` comment lines, tab- or
    space-separated, two integer columns (extra columns ignored).
    ``fmt='csv'``: comma separated, optional header line, first two columns.
    ``fmt='auto'`` picks csv for ``*.csv[.gz]`` or a comma in the first data
    line, snap otherwise. Gzip is recognised by its magic bytes. Each row is an
    arc ``from -> to`` (an edge when ``directed`` is false). Preprocessing and
    relabelling are those of :func:`graph_from_raw_arcs`; ``graph.meta``
    records every count. Bad input raises :class:`InputError` naming the file
    (and the line where there is one).
    """
    path = Path(path)
    if fmt not in ("auto", "snap", "csv"):
        raise InputError(path, "fmt", f"expected 'auto', 'snap' or 'csv', got {fmt!r}")
    if relabel not in ("appearance", "sorted"):
        raise InputError(path, "relabel", f"expected 'appearance' or 'sorted', got {relabel!r}")
    require_file(path, "an edge list")
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == _GZIP_MAGIC
    except OSError as exc:
        raise InputError(path, "file", f"unreadable ({exc.strerror or exc})") from None
    if path.name.endswith(".gz") and not gz:
        raise InputError(path, "gzip", "file name ends in .gz but the file is not gzip-compressed")
    try:
        first = _first_data_line(path)
    except (OSError, EOFError, zlib.error, UnicodeError) as exc:
        raise InputError(path, "gzip", f"unreadable gzip data ({exc})") from None
    if first is None:
        raise InputError(path, "edges", "file holds no edges (empty or only comments)")
    first_no, first_line = first
    if fmt == "auto":
        fmt = _detect_format(path, first_line)
    fields = _split(first_line, fmt)
    if len(fields) < 2 or not fields[1]:
        raise InputError(
            path, "columns", f"line {first_no}: expected two vertex ids, got {first_line[:60]!r}"
        )
    skip = 0
    if not (_is_int(fields[0]) and _is_int(fields[1])):
        if fmt != "csv":
            bad = fields[0] if not _is_int(fields[0]) else fields[1]
            raise InputError(path, "vertex id", f"line {first_no}: {bad[:40]!r} is not an integer")
        skip = first_no  # CSV header line (and the comments before it)
    options = dict(
        header=None,
        usecols=[0, 1],
        dtype=np.int64,
        comment="#",
        engine="c",
        skiprows=skip,
        chunksize=_CHUNK_ROWS,
        compression="gzip" if gz else None,
        encoding="utf-8",
    )
    if fmt == "csv":
        options.update(sep=",", skipinitialspace=True)
    else:
        options.update(sep=r"\s+")
    srcs: list[np.ndarray] = []
    dsts: list[np.ndarray] = []
    try:
        with pd.read_csv(path, **options) as reader:
            for chunk in reader:
                srcs.append(chunk.iloc[:, 0].to_numpy(dtype=np.int64))
                dsts.append(chunk.iloc[:, 1].to_numpy(dtype=np.int64))
                del chunk
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise InputError(path, "gzip", f"unreadable gzip data ({exc})") from None
    except pd.errors.EmptyDataError:
        raise InputError(path, "edges", "file holds no edges (empty or only comments)") from None
    except (ValueError, OverflowError, TypeError) as exc:
        raise _diagnose(path, fmt, skip, f"unparseable edge list ({exc})") from None
    except OSError as exc:
        raise InputError(path, "file", f"unreadable ({exc})") from None
    if sum(a.shape[0] for a in srcs) == 0:
        raise InputError(path, "edges", "file holds no edges (empty or only comments)")
    src = srcs[0] if len(srcs) == 1 else np.concatenate(srcs)
    del srcs
    dst = dsts[0] if len(dsts) == 1 else np.concatenate(dsts)
    del dsts
    base = path.name
    for suffix in (".gz", ".txt", ".csv", ".tsv"):
        base = base.removesuffix(suffix)
    return graph_from_raw_arcs(
        src, dst, directed=directed, keep_largest_component=keep_largest_component,
        relabel=relabel, name=name if name is not None else base, source=str(path),
        meta={"format": fmt},
    )
