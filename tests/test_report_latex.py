"""The LaTeX tables compile in a plain article and fit its text width.

Every table the default and CI configurations make is written by battus.suite.report from
plausible score files (one per run, as the workflow's report rules read them), then compiled with
pdflatex inside ``\\documentclass{article}`` with booktabs and graphicx. A table is wider than the
text where TeX reports an ``Overfull \\hbox``; each table's tabulars are also measured (their width
as set, after any shrinking) and must not exceed ``\\textwidth``. Skipped, saying why, where no TeX
engine is installed (Debian: ``apt-get install texlive-latex-base texlive-latex-recommended``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from test_figures import _plan  # the workflow's plan of a config file, schema defaults filled in

from battus.suite import report

pytest.importorskip("snakemake")

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = {"default": ROOT / "config/config.yaml", "ci": ROOT / "config/test/ci.yaml"}
BASELINES = ("truth", "random", "observed-copy", "graph-distance")


def _score(key: str) -> dict:
    """A plausible score record, different per run but the same on every call."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    dataset, method, _ = key.split("|")
    f1, nrmse = {"truth": (1.0, 0.0)}.get(method, (float(rng.uniform(0.7, 0.92)), float(rng.uniform(0.08, 0.3))))
    events = int(rng.integers(200, 2000))
    violations = int(0.1 * events)
    # one horizon per dataset (its seeds share it), as in a run
    T = int(np.random.default_rng(zlib.crc32(dataset.split(".")[0].encode())).choice([9, 10, 15, 16, 40]))
    return {
        "hermes": {"f1": f1, "nrmse": nrmse, "nrmse_ditto": nrmse * 2**0.5},
        "unobserved": {"f1": float(rng.uniform(0.7, 0.9)), "nrmse": float(rng.uniform(0.1, 0.3))},
        "causal": {"prediction": {"violations": violations, "events": events, "rate": violations / events},
                   "truth": {"violations": 0, "events": events, "rate": 0.0}},
        "algorithm_seconds": float(10 ** rng.uniform(-2, 1)), "model": "sir" if dataset.endswith("sir") else "si",
        "n": 1000, "backend": "cpu", "device": "test", "T": T,
        "observed_times": [T] if "final" in key else [T // 2, T],
        "calibration": {"brier": float(rng.uniform(0.1, 0.3)), "log_loss": float(rng.uniform(0.2, 0.5)),
                        "ece": float(rng.uniform(0, 0.05)), "overconfidence": float(rng.uniform(-0.02, 0.04))},
    }


def _history(tmp_path: Path) -> Path:
    from battus.generators import barabasi_albert
    from battus.io import write_history
    from battus.problem import Problem, observe, schedule_times
    from battus.simulate import simulate

    graph = barabasi_albert(150, 2, seed=1)
    truth = simulate(graph, "sir", 6, 5, 0.2, 0.1, seed=3)
    problem = Problem(graph=graph, model="sir", T=6, n0=5, observations=observe(truth, schedule_times(6)),
                      truth=truth, name="h")
    write_history(tmp_path / "history.h5", problem)
    return tmp_path / "history.h5"


_PUBLISHED = {"hermes_table2": "data/published/hermes_table2.csv", "ditto_kdd23": "data/published/ditto_kdd23.csv",
              "paper": "data/published/battus_paper.csv",
              "battus_paper_tables": "data/published/battus_paper_tables.csv"}


def write_tables(config: str, out: Path) -> list[Path]:
    """Every table of a configuration as the workflow writes it (CSV, Markdown, LaTeX); the .tex paths."""
    plan = _plan(CONFIGS[config])
    history = _history(out)
    written = []
    for name in report.report_made(plan, "table"):
        runs = report.report_runs(name, plan)
        spec = report.report_spec(name, plan)
        item = report.REPORT_ITEMS[name]
        inputs = {}
        if item.inputs == "histories":
            inputs["histories"] = [history] * len(spec["datasets"])
        else:
            paths = []
            for i, (d, m, v) in enumerate(runs):
                paths.append(out / f"{name}-score{i}.json")
                paths[-1].write_text(json.dumps(_score(f"{d}|{m}|{v}")))
            inputs["scores"] = paths
        if item.published:
            inputs["published"] = ROOT / _PUBLISHED[item.published]
        outputs = [out / f"{name}.{ext}" for ext in ("csv", "md", "tex")]
        report.make(name, spec, runs, inputs, outputs)
        written.append(outputs[2])
    return written


DOCUMENT = r"""\documentclass{article}
\usepackage[T1]{fontenc}
\usepackage{booktabs}
\usepackage{graphicx}
\begin{document}
%s
\end{document}
"""

# each tabular measured as set (after \resizebox, which must fit the text) and at its natural width
MEASURE = r"""\makeatletter
\let\battus@resizebox\resizebox
\renewcommand{\resizebox}[3]{\setbox2=\hbox{#3}\setbox0=\hbox{\battus@resizebox{#1}{#2}{#3}}%%
  \typeout{TW \the\wd0/\the\textwidth/\the\wd2/%s}\box0}
\makeatother
"""


def _tex_engine() -> str | None:
    return shutil.which("pdflatex")


@pytest.fixture(scope="module", params=sorted(CONFIGS))
def latex_tables(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tables-{request.param}")
    return request.param, write_tables(request.param, out)


def test_latex_tables_are_plain_latex(latex_tables):
    """No raw Unicode, no ASCII stand-ins for math; the float is table* where wide."""
    _, paths = latex_tables
    for path in paths:
        tex = path.read_text()
        assert tex.isascii(), (path.name, sorted({c for c in tex if not c.isascii()}))
        for bad in ("->", "sqrt(", "beta_I", "beta_R", ">=", "<="):
            assert bad not in tex, (path.name, bad)
        assert r"\caption[" in tex and ("Protocol" in tex or "Data only" in tex), path.name
        assert tex.count(r"\begin{tabular}") == tex.count(r"\resizebox"), path.name


def test_latex_tables_compile_and_fit_the_text_width(latex_tables, tmp_path):
    engine = _tex_engine()
    if engine is None:
        pytest.skip("no TeX engine (pdflatex) installed: apt-get install texlive-latex-base texlive-latex-recommended")
    config, paths = latex_tables
    widths = {}
    for path in paths:
        body = MEASURE % path.stem.replace("_", "-") + r"\input{" + path.as_posix() + "}\n\\clearpage\n"
        doc = tmp_path / f"{path.stem}-doc.tex"
        doc.write_text(DOCUMENT % body)
        proc = subprocess.run([engine, "-interaction=nonstopmode", "-halt-on-error", doc.name], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        log = (tmp_path / f"{path.stem}-doc.log").read_text(errors="replace")
        assert proc.returncode == 0, f"{config}/{path.name} does not compile:\n{proc.stdout[-3000:]}"
        assert "Overfull \\hbox" not in log, f"{config}/{path.name} is wider than the text:\n" + "\n".join(
            line for line in log.splitlines() if "Overfull" in line)
        # log lines wrap at 79 characters: the line is short, the name last
        for width, text, natural, name in re.findall(r"TW ([\d.]+)pt/([\d.]+)pt/([\d.]+)pt/(\S+)", log):
            widths.setdefault(name, []).append((round(float(width), 1), round(float(natural), 1)))
            assert float(width) <= float(text) + 0.1, f"{config}/{name}: {width}pt > \\textwidth {text}pt"
    assert set(widths) == {p.stem.replace("_", "-") for p in paths}
    print(f"{config}: widest tabular per table, (as set, natural) in pt, \\textwidth 345pt:",
          {k: max(v, key=lambda w: w[1]) for k, v in sorted(widths.items())})
