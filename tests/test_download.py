"""Download and mirror layer; no network (file:// URLs stand in for the web)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from battus import download
from battus.download import (
    DITTO_BASE,
    DITTO_FILES,
    DITTO_SHA256,
    MIRROR_ENV,
    SNAP_DATASETS,
    fetch,
    fetch_ditto,
    fetch_snap,
    find_in_mirror,
    mirror_path,
    mirror_shortfall,
)
from battus.errors import InputError

# The mirror beside the checkout (../shared); BATTUS_SHARED overrides, as in conftest.py.
SHARED = Path(os.environ.get("BATTUS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
DATA = SHARED / "data"


@pytest.fixture(autouse=True)
def no_mirror_env(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to reach the network fails the test."""
    real = download.urllib.request.urlopen

    def guarded(request, *args, **kwargs):
        url = request.full_url if hasattr(request, "full_url") else str(request)
        assert url.startswith("file:"), f"test tried the network: {url}"
        return real(request, *args, **kwargs)

    monkeypatch.setattr(download.urllib.request, "urlopen", guarded)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


def test_registry_matches_paper():
    assert set(SNAP_DATASETS) == {"web-stanford", "web-google", "orkut", "livejournal", "oregon2"}
    table = {
        "web-stanford": ("web-Stanford.txt.gz", True, 255_265, 2_234_572),
        "web-google": ("web-Google.txt.gz", True, 855_802, 5_066_842),
        "orkut": ("com-orkut.ungraph.txt.gz", False, 3_072_441, 117_185_083),
        "livejournal": ("soc-LiveJournal1.txt.gz", True, 4_843_953, 68_466_754),
        "oregon2": ("oregon2_010526.txt.gz", False, 11_461, 32_730),
    }
    for key, (file, directed, n, edges) in table.items():
        ds = SNAP_DATASETS[key]
        assert (ds.file, ds.directed, ds.n, ds.edges) == (file, directed, n, edges)
        assert ds.url == "https://snap.stanford.edu/data/" + file
    assert DITTO_BASE.endswith("/339f2d56be45917ac4d5a4cde33b773c81070fac/input/")
    assert sorted(DITTO_FILES.values()) == sorted([
        "synthetic/ba-si.pt", "synthetic/ba-sir.pt", "synthetic/er-si.pt", "synthetic/er-sir.pt",
        "oregon2/oregon2-si.pt", "oregon2/oregon2-sir.pt", "prost/prost-si.pt",
        "prost/prost-sir.pt", "farmers/farmers-si.pt", "covid/covid-sir.pt", "heb/heb-sir.pt",
        "pol/rt-pol.txt",
    ])
    assert set(DITTO_SHA256) == set(DITTO_FILES.values())


def test_shared_mirror_complete_and_checksums(tmp_path):
    """Every canonical file and Oregon2 come from ../shared/data with matching checksums."""
    assert DATA.is_dir(), f"shared mirror missing: {DATA}"
    for relative in DITTO_FILES.values():
        got = fetch_ditto(relative, tmp_path / relative, mirror=DATA / "ditto", progress=False)
        assert got == tmp_path / relative and got.stat().st_size > 0
    got = fetch_snap("oregon2", tmp_path, mirror=DATA / "snap", progress=False)
    assert got == tmp_path / "oregon2_010526.txt.gz"


def test_mirror_path_relative_then_basename(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("nested")
    (tmp_path / "b.txt").write_text("flat")
    assert mirror_path(tmp_path, "sub/a.txt") == tmp_path / "sub" / "a.txt"
    assert mirror_path(tmp_path, "other/b.txt") == tmp_path / "b.txt"
    with pytest.raises(InputError) as info:
        mirror_path(tmp_path, "sub/missing.txt")
    assert info.value.field == "mirror" and "missing.txt" in str(info.value)


def test_fetch_from_mirror_argument_and_env(tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    (mirror / "oregon2").mkdir(parents=True)
    payload = b"1 2\n2 3\n"
    (mirror / "oregon2" / "x.pt").write_bytes(payload)
    out = tmp_path / "out"
    url = DITTO_BASE + "oregon2/x.pt"
    got = fetch(url, out / "x.pt", mirror=mirror, relative="oregon2/x.pt", sha256=sha(payload))
    assert got.read_bytes() == payload
    # Environment variable, destination given as a folder, basename fallback.
    (mirror / "y.txt").write_bytes(payload)
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    out.mkdir(exist_ok=True)
    got = fetch("https://example.invalid/data/y.txt", out, progress=False)
    assert got == out / "y.txt" and got.read_bytes() == payload
    got = fetch("https://example.invalid/data/y.txt", f"{tmp_path}/new/", progress=False)
    assert got == tmp_path / "new" / "y.txt" and got.read_bytes() == payload
    assert leftovers(out) == []


def test_mirror_missing_file_is_input_error(tmp_path):
    with pytest.raises(InputError) as info:
        fetch("https://example.invalid/nothing.gz", tmp_path / "n.gz", mirror=tmp_path)
    assert info.value.field == "mirror"
    assert not (tmp_path / "n.gz").exists()


def test_sha256_mismatch_leaves_nothing(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "f.txt").write_bytes(b"abc")
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        fetch("https://example.invalid/f.txt", out / "f.txt", mirror=mirror, sha256="0" * 64)
    assert info.value.field == "sha256" and "f.txt" in str(info.value)
    assert not (out / "f.txt").exists() and leftovers(out) == []


def test_download_via_urllib(tmp_path, capsys):
    payload = bytes(range(256)) * 20_000  # ~5 MiB, several blocks
    src = tmp_path / "remote" / "blob.bin"
    src.parent.mkdir()
    src.write_bytes(payload)
    out = tmp_path / "out"
    out.mkdir()
    got = fetch(src.as_uri(), out, sha256=sha(payload), progress=True)
    assert got == out / "blob.bin" and got.read_bytes() == payload
    assert "blob.bin" in capsys.readouterr().err
    # Wrong checksum on download: InputError naming the URL and sha256, nothing left.
    with pytest.raises(InputError) as info:
        fetch(src.as_uri(), out / "again.bin", sha256="f" * 64, progress=False)
    assert info.value.field == "sha256" and "blob.bin" in str(info.value)
    assert not (out / "again.bin").exists() and leftovers(out) == []


def test_download_missing_url_fails_at_once(tmp_path, monkeypatch):
    """A file: URL naming nothing is like a 404: no attempt would find it (tests/test_faults.py tries
    the retried, transient failures against a local HTTP server)."""
    sleeps = []
    monkeypatch.setattr(download.time, "sleep", sleeps.append)
    url = (tmp_path / "absent.bin").as_uri()
    with pytest.raises(InputError) as info:
        fetch(url, tmp_path / "out" / "absent.bin", retries=3, progress=False)
    assert info.value.field == "download" and "No such file" in str(info.value)
    assert sleeps == []
    assert not (tmp_path / "out" / "absent.bin").exists()


def test_mirror_layouts(tmp_path):
    """A mirror laid out like resources/downloads, as one source's folder, or flat."""
    (tmp_path / "ditto/synthetic").mkdir(parents=True)
    (tmp_path / "ditto/synthetic/ba-si.pt").write_bytes(b"a")
    (tmp_path / "prost").mkdir()
    (tmp_path / "prost/prost-si.pt").write_bytes(b"b")
    (tmp_path / "rt-pol.txt").write_bytes(b"c")
    assert find_in_mirror(tmp_path, "ditto/synthetic/ba-si.pt") == tmp_path / "ditto/synthetic/ba-si.pt"
    assert find_in_mirror(tmp_path, "ditto/prost/prost-si.pt") == tmp_path / "prost/prost-si.pt"
    assert find_in_mirror(tmp_path, "ditto/pol/rt-pol.txt") == tmp_path / "rt-pol.txt"
    assert find_in_mirror(tmp_path, "ditto/heb/heb-sir.pt") is None
    with pytest.raises(InputError) as info:
        mirror_path(tmp_path, "ditto/heb/heb-sir.pt")
    assert str(tmp_path / "ditto/heb/heb-sir.pt") in str(info.value)


def test_mirror_shortfall_names_every_missing_file_it_would_copy(tmp_path):
    mirror = tmp_path / "mirror"
    (mirror / "ditto/synthetic").mkdir(parents=True)
    (mirror / "ditto/synthetic/ba-si.pt").write_bytes(b"a")
    downloaded = tmp_path / "downloads"
    (downloaded / "ditto/covid").mkdir(parents=True)
    (downloaded / "ditto/covid/covid-sir.pt").write_bytes(b"d")
    downloads = {key: {"url": DITTO_BASE + key.removeprefix("ditto/")} for key in (
        "ditto/synthetic/ba-si.pt", "ditto/synthetic/er-si.pt", "ditto/heb/heb-sir.pt", "ditto/covid/covid-sir.pt")}
    downloads["example/edges.txt.gz"] = {"url": "file:data/example/edges.txt.gz"}
    reads = ["ditto/synthetic/ba-si.pt", "ditto/synthetic/er-si.pt", "ditto/heb/heb-sir.pt",
             "ditto/covid/covid-sir.pt", "example/edges.txt.gz"]
    message = mirror_shortfall(mirror, downloads, reads, folder=downloaded)
    # covid is downloaded already and the example file is kept with the workflow: not looked up
    assert message.startswith(f"mirror {mirror} lacks 2 of the 3 files this run would copy from it: "
                              "ditto/heb/heb-sir.pt, ditto/synthetic/er-si.pt.")
    assert mirror_shortfall(mirror, downloads, ["ditto/synthetic/ba-si.pt"], folder=downloaded) is None
    assert "(no such folder)" in mirror_shortfall(tmp_path / "nowhere", downloads, reads, folder=downloaded)


def test_existing_destination_kept_or_replaced(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "f.txt").write_bytes(b"new")
    dest = tmp_path / "f.txt"
    dest.write_bytes(b"old")
    url = "https://example.invalid/f.txt"
    assert fetch(url, dest, mirror=mirror).read_bytes() == b"old"  # no checksum: kept
    assert fetch(url, dest, mirror=mirror, sha256=sha(b"new")).read_bytes() == b"new"
    dest.write_bytes(b"old")
    assert fetch(url, dest, mirror=mirror, overwrite=True).read_bytes() == b"new"


def test_unknown_snap_dataset(tmp_path):
    with pytest.raises(InputError, match="unknown SNAP dataset"):
        fetch_snap("friendster", tmp_path, mirror=tmp_path)
