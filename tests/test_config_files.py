"""A broken workflow config file, through `snakemake -n`: what the user sees and that nothing is written.

Our checks (the Snakefile's of the embedded default, common.smk's of every file and value) end in
one line on stderr and exit status 2. A --configfile that is not UTF-8 never reaches them:
Snakemake reads it before the Snakefile (snakemake.settings.types.ConfigSettings) and its reader
catches YAML errors but not UnicodeDecodeError, so it prints a traceback and exits with 1. That
test pins the behaviour docs/robustness.md states, so a Snakemake that fixes it shows up here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_BIN = Path(sys.executable).parent
SNAKEMAKE = str(_BIN / "snakemake") if (_BIN / "snakemake").exists() else (shutil.which("snakemake") or "snakemake")
TINY = ROOT / "config/test/tiny.yaml"

pytestmark = pytest.mark.skipif(shutil.which(SNAKEMAKE) is None, reason="snakemake is not installed")


def dry_run(snakefile: Path, workdir: Path, configfile: Path | None = None) -> subprocess.CompletedProcess:
    workdir.mkdir(exist_ok=True)  # made here, so Snakemake has no "creating the folder" to say
    cmd = [SNAKEMAKE, "-n", "-s", str(snakefile), "-d", str(workdir), "--cores", "1", "--nocolor"]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env={**os.environ, "BATTUS_MIRROR": ""})


def not_utf8(tmp_path: Path, source: Path) -> Path:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(source.read_bytes() + "# edited in Latin-1: caf\u00e9\n".encode("latin-1"))
    return bad


def assert_one_line(proc: subprocess.CompletedProcess, workdir: Path, *needles: str) -> None:
    err = proc.stderr.strip()
    assert not proc.stdout.strip(), proc.stdout[-2000:]
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("battus: error: config: "), err
    for needle in needles:
        assert needle in err, err
    assert not any(workdir.iterdir()), "nothing may be written before the config is accepted"


def test_the_default_config_not_utf8_is_one_line(tmp_path):
    # a copy of the workflow whose embedded default was edited badly (no --configfile)
    flow = tmp_path / "flow"
    flow.mkdir()
    shutil.copy(ROOT / "Snakefile", flow)
    for folder in ("rules", "config", "reports"):
        shutil.copytree(ROOT / folder, flow / folder)
    default = flow / "config/config.yaml"
    default.write_bytes(not_utf8(tmp_path, default).read_bytes())
    assert_one_line(dry_run(flow / "Snakefile", tmp_path / "run"), tmp_path / "run", str(default), "not UTF-8")


def test_a_configfile_giving_a_key_twice_is_one_line(tmp_path):
    dup = tmp_path / "dup.yaml"
    dup.write_text(TINY.read_text() + "\nbackend: cpu\n")
    line = len(dup.read_text().splitlines())
    assert_one_line(dry_run(ROOT / "Snakefile", tmp_path / "run", dup), tmp_path / "run",
                    f"{dup}: line {line}: key 'backend' given twice")


def test_a_configfile_breaking_the_schema_is_one_line(tmp_path):
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(TINY.read_text().replace("backend: cpu", "backend: tpu"))
    assert_one_line(dry_run(ROOT / "Snakefile", tmp_path / "run", wrong), tmp_path / "run", "backend: 'tpu'")


def test_a_configfile_not_utf8_is_snakemakes_traceback(tmp_path):
    """Known limit (see the module docstring): a traceback and exit status 1, but nothing written."""
    proc = dry_run(ROOT / "Snakefile", tmp_path / "run", not_utf8(tmp_path, TINY))
    err = (proc.stdout + proc.stderr).strip()  # Snakemake 9 logs it on stdout
    assert proc.returncode == 1, (proc.returncode, err[-2000:])
    assert err.splitlines()[-1].startswith("UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe9"), err[-2000:]
    assert "snakemake/common/configfile.py" in err, "read by Snakemake before the Snakefile"
    assert not any((tmp_path / "run").iterdir()), "nothing may be written"
