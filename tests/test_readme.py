"""The README's command-line section runs as written after its setup commands.

The block is extracted from README.md (not copied here), so an edit that
breaks an example breaks this test. It runs in a scratch folder laid out like
the repository root after the README's setup: ``.venv`` (this interpreter's
environment, where the setup installed ``battus``) and ``data/``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO

README = REPO / "README.md"


def bash_blocks(section: str) -> list[str]:
    """The ```bash blocks under the README heading ``section`` (up to the next heading of that level)."""
    text = README.read_text()
    match = re.search(rf"^## {re.escape(section)}\n(.*?)(?=^## )", text, flags=re.S | re.M)
    assert match, f"README has no section {section!r}"
    return re.findall(r"```bash\n(.*?)```", match.group(1), flags=re.S)


def test_cli_section_runs_as_written(tmp_path):
    env_root = Path(sys.prefix)
    if not (env_root / "bin" / "battus").exists() or not (env_root / "bin" / "activate").exists():
        pytest.skip("needs the tests to run from a venv where the README's setup installed battus")
    blocks = bash_blocks("Reconstructing your own data")
    assert len(blocks) == 1, "the CLI section should hold one bash block"
    (tmp_path / ".venv").symlink_to(env_root)
    (tmp_path / "data").symlink_to(REPO / "data")
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"  # no battus on PATH but what the block itself sets up
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    score = json.loads((tmp_path / "score.json").read_text())
    assert 0.0 < score["hermes"]["f1"] <= 1.0
    for name in ("graph.h5", "hist.h5", "pred.h5", "fitted.h5"):
        assert (tmp_path / name).is_file(), name
    assert "battus-prediction" in proc.stdout  # battus info printed the file's kind


def test_own_method_section_runs_after_the_cli_section(tmp_path):
    """The plug-in example runs as written, on the history the CLI section made, in the same shell."""
    env_root = Path(sys.prefix)
    if not (env_root / "bin" / "battus").exists() or not (env_root / "bin" / "activate").exists():
        pytest.skip("needs the tests to run from a venv where the README's setup installed battus")
    blocks = bash_blocks("Reconstructing your own data") + bash_blocks("Benchmarking your own method")
    assert len(blocks) == 2
    (tmp_path / ".venv").symlink_to(env_root)
    for name in ("data", "examples"):
        (tmp_path / name).symlink_to(REPO / name)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", "\n".join(blocks)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in ("mine.h5", "baseline.h5"):
        assert (tmp_path / name).is_file(), name
