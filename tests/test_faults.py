"""Faults a user meets: download servers failing, a mirror lacking files, two runs in one folder,
kill -9 mid-run, a truncated intermediate.

Downloads go to a local http.server on 127.0.0.1 that answers 404, fails twice before it serves,
or is not there at all; the workflow tests run Snakemake on small configurations in their own
temporary folders, like tests/test_workflow.py.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from battus import download
from battus.download import DITTO_BASE, DITTO_SHA256, MIRROR_ENV, fetch
from battus.errors import InputError
from battus.files import atomic_path, remove_stale_temporaries, temporary_writer

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = ROOT / "Snakefile"
SHARED = ROOT.parent / "shared" / "data"
_BIN = Path(sys.executable).parent
SNAKEMAKE = str(_BIN / "snakemake") if (_BIN / "snakemake").exists() else (shutil.which("snakemake") or "snakemake")
needs_snakemake = pytest.mark.skipif(shutil.which(SNAKEMAKE) is None, reason="snakemake is not installed")
PAYLOAD = b"1 2\n2 3\n3 1\n" * 1000


@pytest.fixture(autouse=True)
def no_mirror_env(monkeypatch):
    monkeypatch.delenv(MIRROR_ENV, raising=False)


class Server:
    """An HTTP server on 127.0.0.1: /ok/<name> serves PAYLOAD, /missing/<name> answers 404,
    /flaky/<name> answers 503 twice and then serves, /short/<name> drops the connection halfway
    the first time. Counts the requests per path."""

    def __init__(self):
        self.requests: dict[str, int] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                n = server.requests[self.path] = server.requests.get(self.path, 0) + 1
                kind = self.path.split("/")[1]
                if kind == "missing" or (kind == "flaky" and n <= 2):
                    self.send_error(404 if kind == "missing" else 503)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(PAYLOAD)))
                self.end_headers()
                if kind == "short" and n == 1:
                    self.wfile.write(PAYLOAD[: len(PAYLOAD) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(PAYLOAD)

            def log_message(self, *args):  # quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def count(self, path: str) -> int:
        return self.requests.get(path, 0)


@pytest.fixture
def server():
    s = Server()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


@pytest.fixture
def sleeps(monkeypatch):
    """The fetcher's pauses between attempts, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(download.time, "sleep", recorded.append)
    return recorded


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".")) if folder.is_dir() else []


# ---------------------------------------------------------------------------
# permanent download errors fail at once; transient ones are retried, by the fetcher only


def test_404_fails_at_once(server, sleeps, tmp_path):
    with pytest.raises(InputError) as info:
        fetch(f"{server.base}/missing/x.txt", tmp_path / "x.txt", progress=False)
    assert info.value.field == "download" and "HTTP 404" in str(info.value)
    assert server.count("/missing/x.txt") == 1 and sleeps == []
    assert not (tmp_path / "x.txt").exists() and leftovers(tmp_path) == []


def test_checksum_mismatch_fails_at_once(server, sleeps, tmp_path):
    with pytest.raises(InputError) as info:
        fetch(f"{server.base}/ok/x.txt", tmp_path / "x.txt", sha256="0" * 64, progress=False)
    assert info.value.field == "sha256"
    assert server.count("/ok/x.txt") == 1 and sleeps == []
    assert leftovers(tmp_path) == []


def test_server_error_twice_then_served(server, sleeps, tmp_path):
    got = fetch(f"{server.base}/flaky/x.txt", tmp_path / "x.txt", progress=False,
                sha256=hashlib.sha256(PAYLOAD).hexdigest())
    assert got.read_bytes() == PAYLOAD
    assert server.count("/flaky/x.txt") == 3 and sleeps == [1, 2]


def test_connection_dropped_halfway_is_retried(server, sleeps, tmp_path):
    got = fetch(f"{server.base}/short/x.txt", tmp_path / "x.txt", progress=False)
    assert got.read_bytes() == PAYLOAD
    assert server.count("/short/x.txt") == 2 and sleeps == [1] and leftovers(tmp_path) == []


def test_refused_connection_tried_three_times(sleeps, tmp_path, monkeypatch):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    opened = []
    real = download.urllib.request.urlopen
    monkeypatch.setattr(download.urllib.request, "urlopen", lambda *a, **k: opened.append(1) or real(*a, **k))
    with pytest.raises(InputError) as info:
        fetch(f"http://127.0.0.1:{port}/x.txt", tmp_path / "x.txt", progress=False)
    assert "failed after 3 attempts" in str(info.value) and "refused" in str(info.value)
    assert len(opened) == 3 and sleeps == [1, 2]


def test_disk_full_fails_at_once(server, sleeps, tmp_path, monkeypatch):
    class FullDisk:
        def __init__(self, *args, **kwargs):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(download, "open", FullDisk, raising=False)  # the module's open, not the builtin
    with pytest.raises(InputError) as info:
        fetch(f"{server.base}/ok/x.txt", tmp_path / "x.txt", progress=False)
    assert str(tmp_path / "x.txt") in str(info.value) and "No space left" in str(info.value)
    assert server.count("/ok/x.txt") == 1 and sleeps == []
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------------------
# temporary files: only those of a writer that is provably gone are deleted


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_temporary_name_says_host_and_pid(tmp_path):
    target = tmp_path / "history.h5"
    with atomic_path(target) as tmp:
        host, pid = temporary_writer(tmp, target)
        assert pid == os.getpid() and host == socket.gethostname().split(".")[0]
        tmp.write_bytes(b"data")
    assert target.read_bytes() == b"data" and leftovers(tmp_path) == []
    long_name = tmp_path / ("x" * 240)  # no room for host and pid: still written, left to the age rule
    with atomic_path(long_name) as tmp:
        assert temporary_writer(tmp, long_name) is None
        tmp.write_bytes(b"data")
    assert long_name.read_bytes() == b"data"


def test_only_temporaries_of_gone_writers_are_removed(tmp_path):
    target = tmp_path / "history.h5"
    host = socket.gethostname().split(".")[0]
    day_ago = time.time() - 2 * 24 * 3600
    files = {
        "live": tmp_path / f".history.h5.{host}.{os.getpid()}.abc123de.tmp",
        "dead": tmp_path / f".history.h5.{host}.{_dead_pid()}.abc123de.tmp",
        "other host, fresh": tmp_path / ".history.h5.node042.1.abc123de.tmp",
        "other host, old": tmp_path / ".history.h5.node043.1.abc123de.tmp",
        "unnamed writer, fresh": tmp_path / ".history.h5.abc123de.tmp",
        "unnamed writer, old": tmp_path / ".history.h5.xyz789ab.tmp",
        "another output's": tmp_path / f".history.h5.bak.{host}.{_dead_pid()}.abc123de.tmp",
    }
    for path in files.values():
        path.write_bytes(b"partial")
    for key in ("other host, old", "unnamed writer, old"):
        os.utime(files[key], (day_ago, day_ago))
    removed = remove_stale_temporaries(target)
    gone = {key for key, path in files.items() if not path.exists()}
    assert gone == {"dead", "other host, old", "unnamed writer, old"}
    assert set(removed) == {files[k] for k in gone}


def test_second_run_keeps_the_first_runs_temporary(tmp_path, monkeypatch):
    """The race of two runs in one folder: while one job writes history.h5, a second job for the
    same output starts and cleans up before it writes; the first job's file survives and lands."""
    sys.path.insert(0, str(ROOT / "workflow_scripts"))
    monkeypatch.setattr(sys, "path", sys.path)
    import signal

    from _common import prepare_outputs

    target = tmp_path / "results" / "ba-si" / "history.h5"
    handler = signal.getsignal(signal.SIGTERM)
    try:
        with atomic_path(target) as tmp:
            tmp.write_bytes(b"first run")
            prepare_outputs(SimpleNamespace(output=[str(target)]))  # the second run's job starts
            assert tmp.exists()
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert target.read_bytes() == b"first run"


# ---------------------------------------------------------------------------
# the workflow: the mirror checked before any job, downloads, kill -9, truncated intermediates


def run_snakemake(work: Path, *args: str, configfile: Path, env: dict | None = None,
                  timeout: int = 300) -> subprocess.CompletedProcess:
    # --configfile takes several files: targets go before it
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(work), "--cores", "2", "--nocolor", *args,
           "--configfile", str(configfile)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, MIRROR_ENV: "", **(env or {})})


def ok(proc: subprocess.CompletedProcess) -> str:
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    return out


def tiny_config(tmp_path: Path, downloads: dict | None = None, datasets: dict | None = None) -> Path:
    cfg = yaml.safe_load((ROOT / "config/test/tiny.yaml").read_text())
    cfg["downloads"] = downloads or {}
    cfg["datasets"].update(datasets or {})
    cfg["experiments"]["datasets"]["datasets"] += list(datasets or {})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def ditto(relative: str) -> dict:
    return {"url": DITTO_BASE + relative, "sha256": DITTO_SHA256[relative]}


@needs_snakemake
def test_download_rule_fails_once_and_logs_one_line(server, tmp_path):
    """A 404 is asked for once in the whole run (no rule-level retries) and is one line in the log
    beside the download, no traceback; a good download's log records its URL and sha256."""
    cfg = tiny_config(tmp_path, downloads={
        "web/gone.txt": {"url": f"{server.base}/missing/gone.txt", "sha256": None},
        "web/edges.txt": {"url": f"{server.base}/ok/edges.txt", "sha256": None},
    })
    work = tmp_path / "run"
    proc = run_snakemake(work, "resources/downloads/web/gone.txt", configfile=cfg)
    assert proc.returncode != 0
    assert server.count("/missing/gone.txt") == 1
    log = (work / "resources/downloads/web/gone.txt.log").read_text()
    assert f"battus: error: {server.base}/missing/gone.txt: download: HTTP 404" in log
    assert "Traceback" not in log and "Traceback (most recent" not in proc.stderr
    assert not (work / "results/logs/download").exists()

    ok(run_snakemake(work, "resources/downloads/web/edges.txt", configfile=cfg))
    log = (work / "resources/downloads/web/edges.txt.log").read_text()
    assert f"url {server.base}/ok/edges.txt" in log
    assert hashlib.sha256(PAYLOAD).hexdigest() in log


@needs_snakemake
@pytest.mark.skipif(not (SHARED / "ditto/synthetic/ba-si.pt").is_file(), reason="no shared mirror")
def test_mirror_checked_before_any_job(tmp_path):
    """An incomplete mirror stops even a dry run at once, naming the mirror and every file the run
    needs and it lacks (not those it does not need); with all of them, the import runs and the
    history's provenance names the URL its download came from."""
    downloads = {r: ditto(r) for r in ("synthetic/ba-si.pt", "synthetic/er-si.pt", "prost/prost-si.pt",
                                       "heb/heb-sir.pt")}
    downloads = {f"ditto/{r}": spec for r, spec in downloads.items()}
    datasets = {f"canon-{r.split('/')[-1][:-3]}": {"import": r, "label": r}
                for r in ("ditto/synthetic/ba-si.pt", "ditto/synthetic/er-si.pt", "ditto/prost/prost-si.pt")}
    cfg = tiny_config(tmp_path, downloads, datasets)  # heb-sir is declared, read by no dataset
    mirror = tmp_path / "mirror"
    (mirror / "ditto/synthetic").mkdir(parents=True)
    shutil.copy(SHARED / "ditto/synthetic/ba-si.pt", mirror / "ditto/synthetic/ba-si.pt")
    work = tmp_path / "run"
    proc = run_snakemake(work, "--dry-run", configfile=cfg, env={MIRROR_ENV: str(mirror)})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    message = next(line for line in out.splitlines() if f"mirror {mirror} lacks" in line)
    assert "lacks 2 of the 3 files" in message
    assert "ditto/prost/prost-si.pt, ditto/synthetic/er-si.pt" in message
    assert "heb" not in message and "ba-si" not in message
    assert not (work / "resources").exists() and not (work / "results").exists()

    # the complete mirror: the import runs; its provenance records the download's URL
    target = "results/canon-ba-si/history.h5"
    ok(run_snakemake(work, target, configfile=cfg, env={MIRROR_ENV: str(SHARED)}))
    import h5py

    with h5py.File(work / target) as fh:
        record = json.loads(fh.attrs["provenance"])
    assert record["source"] == "resources/downloads/ditto/synthetic/ba-si.pt"
    assert record["source_url"] == DITTO_BASE + "synthetic/ba-si.pt"
    log = (work / "resources/downloads/ditto/synthetic/ba-si.pt.log").read_text()
    assert f"url {DITTO_BASE}synthetic/ba-si.pt" in log and DITTO_SHA256["synthetic/ba-si.pt"] in log


def documented_resume_command() -> str:
    """The resume command of docs/workflow.md's "Faults and resuming" section."""
    text = (ROOT / "docs/workflow.md").read_text()
    section = text[text.index("## Faults and resuming"):]
    return next(line for line in section.splitlines() if "--rerun-incomplete" in line).strip()


def _incomplete_markers(work: Path) -> list[Path]:
    folder = work / ".snakemake/incomplete"
    if not folder.is_dir():
        return []
    return [p for p in folder.rglob("*") if p.is_file() and p.name != "migration_underway"]


@needs_snakemake
@pytest.mark.slow
def test_kill_after_rename_then_documented_resume_and_truncated_input(tmp_path):
    """kill -9 after a job renamed its output into place but before Snakemake recorded it: a plain
    rerun refuses the complete file, the documented command resumes. Then a truncated graph with
    its old mtime: a plain rerun does not notice it, the job reading it says in one line how to
    remake it, and that command works."""
    cfg = tiny_config(tmp_path)
    work = tmp_path / "run"
    graph = work / "results/graphs/ba.h5"
    ok(run_snakemake(work, "results/graphs/ba.h5", configfile=cfg))
    complete = graph.read_bytes()

    # the state kill -9 leaves when it lands between the rename and the bookkeeping: the job
    # started (Snakemake's incomplete marker, its lock), the complete file is at its final path
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(work), "--cores", "2", "--forcerun", "results/graphs/ba.h5",
           "--until", "results/graphs/ba.h5", "--configfile", str(cfg)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, MIRROR_ENV: ""})
    try:
        end = time.time() + 120
        while not _incomplete_markers(work) and proc.poll() is None and time.time() < end:
            time.sleep(0.005)
        assert _incomplete_markers(work), "the job did not start"
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    time.sleep(0.5)
    graph.write_bytes(complete)

    plain = run_snakemake(work, "results/graphs/ba.h5", configfile=cfg)
    assert plain.returncode != 0  # the lock the killed run left
    ok(run_snakemake(work, "--unlock", configfile=cfg))
    plain = run_snakemake(work, "results/graphs/ba.h5", configfile=cfg)
    assert plain.returncode != 0 and "IncompleteFilesException" in plain.stdout + plain.stderr
    # the documented command, as a user types it (plus this test's folder, config and target)
    ours = f"{shlex.quote(SNAKEMAKE)} -s {SNAKEFILE} -d {work} --nocolor"
    command = documented_resume_command()
    typed = command.replace("snakemake", ours) + f" results/graphs/ba.h5 --configfile {cfg}"
    resume = subprocess.run(["bash", "-c", typed], capture_output=True, text=True, timeout=300,
                            env={**os.environ, MIRROR_ENV: ""})
    assert resume.returncode == 0, f"{command}\n{resume.stdout[-3000:]}\n{resume.stderr[-3000:]}"
    assert "Nothing to be done" in ok(run_snakemake(work, "--dry-run", "results/graphs/ba.h5", configfile=cfg))
    assert list((work / "results").rglob("*.tmp")) == []

    # a truncated intermediate that keeps its old modification time
    history = work / "results/ba-si/history.h5"
    ok(run_snakemake(work, "results/ba-si/history.h5", configfile=cfg))
    before = graph.stat()
    with open(graph, "r+b") as fh:
        fh.truncate(before.st_size // 2)
    os.utime(graph, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "Nothing to be done" in ok(run_snakemake(work, "--dry-run", "results/ba-si/history.h5", configfile=cfg))
    history.unlink()
    failed = run_snakemake(work, "results/ba-si/history.h5", configfile=cfg)
    assert failed.returncode != 0
    hint = [line for line in failed.stderr.splitlines()
            if line.startswith("battus: error: results/graphs/ba.h5: ")
            and "delete it or rerun with --forcerun results/graphs/ba.h5" in line]
    assert hint, failed.stderr[-3000:]
    log = (work / "results/logs/simulate/ba-si.log").read_text()
    assert "Traceback" not in log and hint[0] in log
    recover = re.search(r"--forcerun (\S+)", hint[0]).group(1)
    ok(run_snakemake(work, "results/ba-si/history.h5", "--forcerun", recover, configfile=cfg))
    assert history.is_file() and graph.stat().st_size > before.st_size // 2


# ---------------------------------------------------------------------------
# errors in a rule's log: one line first, a bug's traceback only after it


def test_rule_log_error_is_one_line_with_the_traceback_last(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "path", [str(ROOT / "workflow_scripts"), *sys.path])
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.delenv("BATTUS_DEBUG", raising=False)
    import logging

    from _common import setup_log

    log_file = tmp_path / "job.log"
    log = setup_log(SimpleNamespace(log=[str(log_file)]))
    try:
        try:
            raise InputError("results/ba-si/history.h5", "truth", "missing")
        except InputError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        lines = log_file.read_text().splitlines()
        assert len(lines) == 1 and lines[0].endswith("battus: error: results/ba-si/history.h5: truth: missing")

        try:
            {}["n0"]
        except KeyError as exc:
            sys.excepthook(type(exc), exc, exc.__traceback__)
        lines = log_file.read_text().splitlines()
        assert lines[1].endswith(f"failed: KeyError: 'n0' (traceback at the end of {log_file})")
        assert lines[2] == "Traceback (most recent call last):" and lines[-1] == "KeyError: 'n0'"
        assert "Traceback" not in capsys.readouterr().err
    finally:
        for handler in list(log.handlers):
            log.removeHandler(handler)
            handler.close()
        logging.getLogger("battus.workflow").handlers.clear()
