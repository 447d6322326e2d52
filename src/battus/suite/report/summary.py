"""The report's first page: what this run was, where and how long it took, and how to read it.

:func:`summary_spec` says from the workflow's plan what the run asked for (configuration, datasets,
methods, controls and baselines, tables and figures); :func:`gather` reads what the run did from its
files: the histories' provenance (simulated or imported), the predictions' provenance (backend,
device, host), the score files, the benchmark files (time), the canonical table (the random
control's scores), the code's version and commit, the machine and the library versions.
:func:`summary_rst` writes it as reStructuredText, which the report's landing text
(``reports/workflow.rst``) includes; :func:`write_summary` also writes it as a page of its own.
"""

from __future__ import annotations

import csv
import json
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from ...memory import usable_cores
from .tables import fmt_value, label_text

if TYPE_CHECKING:
    from ..experiments import Plan

LIBRARIES = ("battus", "numpy", "numba", "numba-cuda", "h5py", "pandas", "scipy", "matplotlib", "snakemake")


# ---------------------------------------------------------------------------
# What the run asked for (from the plan: a param of the spec rule)


def summary_spec(plan: Plan, tables: list[str], figures: list[str]) -> dict:
    """What the first page says about the configuration, from the workflow's plan."""
    runs = plan.all_runs()
    datasets = {}
    for d, s in plan.datasets.items():
        base = plan.base_dataset(d)
        if base != d:  # a seed replicate: counted under the dataset it repeats
            datasets[base]["seeds"].append(plan.seed_of(d))
            continue
        if "import" in s:
            source = f"imported ({s['import']})"
        elif "graph" in s:
            g = plan.graphs[s["graph"]]
            kind = f"SNAP-format edge list {g['download']}" if "download" in g else f"{g['generator']} generator"
            source = f"simulated on graph {s['graph']} ({kind})"
        else:
            source = f"resimulated on the graph of {s['topology']}"
        datasets[d] = {"label": label_text(s.get("label", d)), "model": s.get("model", ""), "source": source,
                       "seeds": [] if "import" in s else [plan.seed_of(d)]}
    methods = {}
    for _, m, v in runs:
        kind = ("control" if plan.is_control(m) else "baseline" if plan.is_yardstick(m)
                else "plug-in" if m in plan.plugins else "method")
        entry = methods.setdefault(m, {"label": label_text(plan.run_label(m, "default")), "kind": kind,
                                       "variants": []})
        if v not in entry["variants"]:
            entry["variants"].append(v)
    canonical = plan.experiments.get("canonical") or {}
    return {
        "name": plan.name,
        "results": plan.results,
        "backend": plan.backend,
        "datasets": datasets,
        "methods": methods,
        "experiments": [e for e in plan.experiments if plan.experiments[e]],
        "tables": list(tables),
        "figures": list(figures),
        "runs": [list(r) for r in runs],
        "graphs": sorted({s["graph"] for s in plan.datasets.values() if "graph" in s}),
        "random_label": plan.run_label("random", "default"),
        "canonical_has_random": any(m == "random" for m, _ in canonical.get("methods", [])),
    }


# ---------------------------------------------------------------------------
# What the run did (from its files)


def _git(base: Path, *args: str) -> str | None:
    if not shutil.which("git"):
        return None
    done = subprocess.run(["git", "-C", str(base), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def code_version(workflow_dir: str | Path) -> dict:
    from ... import __version__

    base = Path(workflow_dir)
    commit = _git(base, "rev-parse", "HEAD")
    dirty = bool(_git(base, "status", "--porcelain", "--untracked-files=no")) if commit else False
    return {"version": __version__, "commit": commit, "dirty": dirty}


def machine() -> dict:
    cpu = platform.processor() or platform.machine()
    memory = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = int(line.split()[1]) / 2**20  # kB -> GiB
                break
    except OSError:
        pass
    gpus = []
    if shutil.which("nvidia-smi"):
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                              capture_output=True, text=True, check=False, timeout=30)
        gpus = [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []
    return {"host": platform.node(), "cpu": cpu, "cores": usable_cores(), "memory_gib": memory, "gpus": gpus,
            "os": platform.platform(), "python": platform.python_version()}


def library_versions() -> dict:
    out = {"python": platform.python_version()}
    for name in LIBRARIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def _attrs(path: Path) -> dict:
    """A history's or prediction's top-level attributes and provenance (nothing else is read)."""
    import h5py

    with h5py.File(path, "r") as fh:
        prov = fh.attrs.get("provenance")
        out = {"provenance": json.loads(prov) if prov else {}}
        for key in ("T", "model", "backend", "device"):
            if key in fh.attrs:
                value = fh.attrs[key]
                out[key] = value.decode() if isinstance(value, bytes) else value
        if "graph" in fh and "n" in fh["graph"].attrs:
            out["n"] = int(fh["graph"].attrs["n"])
    return out


def _benchmark_paths(results: str, spec: dict) -> list[Path]:
    """The benchmark files of this run's benchmarked jobs (rules/data.smk, rules/reconstruct.smk)."""
    out = [Path(results, "benchmarks", "graph", f"{g}.tsv") for g in spec["graphs"]]
    for d in _all_datasets(spec):
        out += [Path(results, "benchmarks", "simulate", f"{d}.tsv"), Path(results, "benchmarks", "import", f"{d}.tsv")]
    for d, m, v in spec["runs"]:
        out += [Path(results, "benchmarks", "reconstruct", d, m, f"{v}.tsv"),
                Path(results, "benchmarks", "score", d, m, f"{v}.tsv")]
    return [p for p in dict.fromkeys(out) if p.is_file()]


def _all_datasets(spec: dict) -> list[str]:
    return list(dict.fromkeys(d for d, _, _ in spec["runs"]))


def timing(results: str, spec: dict, finished: list[str | Path]) -> dict:
    """When the run's jobs ran: from the first benchmarked job's start (its benchmark file's time less
    its seconds) to the last of ``finished`` (the tables and figures); and the benchmarked jobs' seconds."""
    starts, seconds, jobs = [], 0.0, 0
    for path in _benchmark_paths(results, spec):
        with open(path, newline="") as fh:
            rows = list(csv.DictReader(fh, delimiter="\t"))
        if not rows:
            continue
        s = float(rows[-1]["s"])
        seconds += s
        jobs += 1
        starts.append(path.stat().st_mtime - s)
    ends = [Path(p).stat().st_mtime for p in finished if Path(p).exists()]
    if not starts or not ends:
        return {"jobs": jobs, "job_seconds": seconds}
    start, end = min(starts), max(ends)
    return {"start": start, "end": end, "wall_seconds": max(end - start, 0.0), "jobs": jobs, "job_seconds": seconds}


def random_control(canonical_csv: str | Path | None, label: str) -> dict:
    """The random control's mean F1 and NRMSE per model from the canonical table's CSV (rows
    ``dataset = all``), e.g. ``{"SI": {"f1": .., "nrmse": ..}}``; {} where the table has none."""
    if not canonical_csv or not Path(canonical_csv).is_file():
        return {}
    out: dict[str, dict] = {}
    with open(canonical_csv, newline="") as fh:
        for row in csv.DictReader(fh):
            if row.get("dataset") != "all" or row.get("method", "").strip() != label_text(label):
                continue
            metric = {"mean_f1": "f1", "mean_nrmse": "nrmse"}.get(row.get("metric", ""))
            if metric:
                out.setdefault(row.get("model", ""), {})[metric] = float(row["value"])
    return out


def gather(spec: dict, workflow_dir: str | Path, histories: list, canonical_csv: str | Path | None,
           finished: list) -> dict:
    """Everything the first page reports that the plan does not say: read from the run's files."""
    results = spec["results"]
    sources: dict[str, int] = {}
    models: dict[str, str] = {}  # dataset (its history's folder) -> model, for imported datasets
    for path in histories:
        record = _attrs(Path(path))
        stage = record["provenance"].get("stage", "unknown")
        sources[stage] = sources.get(stage, 0) + 1
        models[Path(path).parent.name] = str(record.get("model", ""))
    backends: dict[str, int] = {}
    hosts: dict[str, int] = {}
    for d, m, v in spec["runs"]:
        prediction = Path(results, d, m, v, "prediction.h5")
        if not prediction.is_file():
            continue
        record = _attrs(prediction)
        prov = record["provenance"]
        where = f"{record.get('backend', prov.get('backend', '?'))} ({record.get('device', prov.get('device', '?'))})"
        backends[where] = backends.get(where, 0) + 1
        host = prov.get("host") or "?"
        hosts[host] = hosts.get(host, 0) + 1
    return {
        "code": code_version(workflow_dir),
        "machine": machine(),
        "libraries": library_versions(),
        "histories": sources,
        "models": models,
        "backends": backends,
        "hosts": hosts,
        "timing": timing(results, spec, finished),
        "random": random_control(canonical_csv, spec["random_label"]) if spec.get("canonical_has_random") else {},
        # the baselines' means from the same table, to say where they stand against the random control
        "baselines": {e["label"]: random_control(canonical_csv, e["label"]) for e in spec["methods"].values()
                      if e["kind"] == "baseline"} if spec.get("canonical_has_random") else {},
        "made": datetime.now(UTC).isoformat(timespec="seconds"),
    }


# ---------------------------------------------------------------------------
# Writing it


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def _when(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _rst_escape(text: str) -> str:
    for ch in ("\\", "*", "`", "|", "_"):
        text = text.replace(ch, "\\" + ch)
    return text


_STAGES = {"simulate": "simulated by Battus's SI/SIR simulator", "import-hermes": "imported from the canonical "
           "DITTO/HERMES exports", "unknown": "of unknown origin (no provenance)"}


def reading_guide(spec: dict, facts: dict) -> str:
    """The one-paragraph reading guide."""
    histories = "; ".join(f"{n} {_STAGES.get(stage, stage)}" for stage, n in sorted(facts["histories"].items()))
    controls = [m for m, e in spec["methods"].items() if e["kind"] == "control"]
    text = (f"This run reconstructed {len(spec['runs'])} (dataset, method, variant) runs on "
            f"{sum(facts['histories'].values())} histories ({histories or 'none read'}), observed at the frames "
            "each dataset's schedule names, and scored every prediction with the HERMES-compatible scorer "
            "(final frame pinned), the unobserved-only scorer and the causal-violation rate. "
            "Open *Tables* for the paper's tables in their wide layout (the eye icon shows a table; its CSV, "
            "one row per number, is listed beside it for download), *Figures* for the figures and *Scores* "
            "for every number of the run in one long CSV. ")
    if controls:
        text += ("The controls check the protocol and are never ranked or bold: ``truth`` copies the true "
                 "history (it must score F1 1 and NRMSE 0), ``random`` is a random history consistent with "
                 "the observations. ")
    if facts.get("random"):
        parts = [f"{model} mean F1 {fmt_value(v.get('f1'), 'metric')}, NRMSE {fmt_value(v.get('nrmse'), 'metric')}"
                 for model, v in facts["random"].items()]
        text += (f"In this run's canonical table the random control scores {'; '.join(parts)}: it is not a "
                 "floor of zero, because the observed frames count and the final frame is pinned, so much of "
                 "the score is free; read a method's quality as its margin over the random control (the "
                 "Δ vs random columns), not as its raw F1.")
    elif "random" in spec["methods"]:
        text += ("The random control is not a floor of zero (the observed frames count and the final frame is "
                 "pinned): read a method's quality as its margin over it.")
    baselines = [e["label"] for e in spec["methods"].values() if e["kind"] == "baseline"]
    if baselines:
        text += (f" The baselines ({', '.join(baselines)}) are fixed dating rules with no diffusion model (every "
                 "change as early as the observations allow; or by distance in the graph), not a floor above the "
                 "random control: on the canonical data they score below it on F1 (under DITTO's final-frame "
                 "protocol on all 12 datasets), because committing every vertex to an extreme date costs more "
                 "than spreading the dates uniformly. They show what such a rule costs; beating them is no "
                 "evidence of quality.")
        measured = _baseline_means(facts)
        if measured:
            text += f" In this run's canonical table: {measured}."
    return text


def _baseline_means(facts: dict) -> str:
    """Each baseline's mean F1 beside the random control's, per model, from the canonical table."""
    random = facts.get("random") or {}
    parts = []
    for label, per_model in (facts.get("baselines") or {}).items():
        for model, v in per_model.items():
            if "f1" in v and "f1" in random.get(model, {}):
                parts.append(f"{label} {model} mean F1 {fmt_value(v['f1'], 'metric')} against the random "
                             f"control's {fmt_value(random[model]['f1'], 'metric')}")
    return "; ".join(parts)


def summary_rst(spec: dict, facts: dict) -> str:
    code, mach, t = facts["code"], facts["machine"], facts["timing"]
    commit = "unknown (not a git checkout)"
    if code["commit"]:
        commit = f"``{code['commit'][:12]}``" + (" with uncommitted changes to tracked files" if code["dirty"] else "")
    gpus = "; ".join(mach["gpus"]) if mach["gpus"] else "none found (nvidia-smi absent or no device)"
    memory = f", {mach['memory_gib']:.0f} GiB memory" if mach.get("memory_gib") else ""
    backends = ", ".join(f"{k}: {n}" for k, n in sorted(facts["backends"].items())) or "none read"
    hosts = ", ".join(f"{k} ({n})" for k, n in sorted(facts["hosts"].items())) or "none read"
    if "wall_seconds" in t:
        when = f"{_when(t['start'])} to {_when(t['end'])}"
        wall = (f"{_duration(t['wall_seconds'])} from the first benchmarked job's start to the last table or "
                "figure (over several invocations, idle time between them included); the "
                f"{t['jobs']} benchmarked jobs (graphs, simulations, reconstructions, scores) took "
                f"{_duration(t['job_seconds'])} together")
    else:
        when, wall = "unknown (no benchmark files)", "unknown"
    lines = [
        f"Battus report: configuration ``{spec['name']}``",
        "=" * 80,
        "",
        reading_guide(spec, facts),
        "",
        f":Configuration: ``{spec['name']}`` (results under ``{spec['results']}``, backend setting "
        f"``{spec['backend']}``)",
        f":Battus: {code['version']}, commit {commit}",
        f":Machine: {_rst_escape(mach['host'])}: {_rst_escape(mach['cpu'])}, {mach['cores']} cores{memory}; "
        f"GPU: {_rst_escape(gpus)}; {_rst_escape(mach['os'])}",
        f":Reconstructions ran on: {_rst_escape(backends)}; hosts: {_rst_escape(hosts)}",
        f":Date: {when} (this page made {facts['made']})",
        f":Wall time: {wall}",
        ":Libraries: " + ", ".join(f"{k} {v}" for k, v in facts["libraries"].items()),
        "",
        "Datasets",
        "-" * 80,
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "",
        "   * - Dataset",
        "     - Label",
        "     - Model",
        "     - Source",
        "     - Seeds",
    ]
    for d, e in spec["datasets"].items():
        seeds = ", ".join(str(s) for s in e["seeds"]) or "fixed data"
        model = e["model"] or facts.get("models", {}).get(d, "")
        cells = [_rst_escape(e["label"]), model.upper(), _rst_escape(e["source"]), seeds]
        lines += [f"   * - ``{d}``", *(f"     - {cell}" for cell in cells)]
    lines += ["", "Methods, controls and baselines", "-" * 80, ""]
    kinds = (("method", "Methods under test"), ("plug-in", "Plug-in methods"), ("control", "Controls"),
             ("baseline", "Baselines"))
    for kind, title in kinds:
        named = [f"``{m}`` ({_rst_escape(e['label'])}; {len(e['variants'])} variant{'s' * (len(e['variants']) > 1)})"
                 for m, e in spec["methods"].items() if e["kind"] == kind]
        if named:
            lines.append(f"- {title}: " + ", ".join(named))
    lines += ["", f"Tables: {', '.join(spec['tables']) or 'none'}. Figures: {', '.join(spec['figures']) or 'none'}.",
              ""]
    return "\n".join(lines)


def write_summary(spec: dict, facts: dict, rst_path: str | Path, html_path: str | Path) -> None:
    """The first page as reStructuredText (included by the report's landing text) and as HTML."""
    from docutils.core import publish_string

    text = summary_rst(spec, facts)
    Path(rst_path).write_text(text, encoding="utf-8")
    html = publish_string(text, writer_name="html5", settings_overrides={
        "output_encoding": "unicode", "report_level": 3, "halt_level": 5, "embed_stylesheet": True})
    Path(html_path).write_text(html, encoding="utf-8")
