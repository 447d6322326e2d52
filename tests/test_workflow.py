"""The Snakemake workflow: per-ablation reruns, kill-and-resume, schema, lint, paper dry run.

Every test runs Snakemake in its own temporary folder (``--directory``) on the
small configurations of config/test/, so nothing touches the project's own
results/ or .snakemake/. CPU only; each test takes well under two minutes.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = ROOT / "Snakefile"
# the snakemake of this interpreter's environment first (CI installs into an unactivated .venv)
_BIN = Path(sys.executable).parent
SNAKEMAKE = str(_BIN / "snakemake") if (_BIN / "snakemake").exists() else (shutil.which("snakemake") or "snakemake")
SHARED = ROOT.parent / "shared" / "data"

pytestmark = pytest.mark.skipif(shutil.which(SNAKEMAKE) is None, reason="snakemake is not installed")


def snakemake(workdir: Path, *args: str, configfile: Path | None = None, check: bool = True,
              env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(workdir), "--cores", "2", "--nocolor"]
    if configfile is not None:
        cmd += ["--configfile", str(configfile)]
    proc = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake {' '.join(args)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def planned_outputs(proc: subprocess.CompletedProcess) -> dict[str, set[str]]:
    """rule -> output paths of the jobs a dry run would execute."""
    text = proc.stdout + proc.stderr
    plan: dict[str, set[str]] = {}
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        m = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not m:
            continue
        out = re.search(r"^\s+output: (.*)$", block, re.M)
        outputs = {o.strip() for o in out.group(1).split(",")} if out else set()
        plan.setdefault(m.group(1), set()).update(outputs)
    return plan


def tiny_config(tmp_path: Path, **changes) -> Path:
    cfg = yaml.safe_load((ROOT / "config/test/tiny.yaml").read_text())
    for dotted, value in changes.items():
        node = cfg
        keys = dotted.split(".")
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def mtimes(root: Path) -> dict[str, float]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in (root / "results").rglob("*")
            if p.is_file() and "/logs/" not in f"/{p.relative_to(root)}" and "benchmarks" not in p.parts}


# ---------------------------------------------------------------------------
# (a) changing one ablation's parameter reruns only that ablation and its tables


@pytest.mark.slow
def test_rerun_one_ablation_after_param_change(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    snakemake(work, configfile=tiny_config(tmp_path))
    before = mtimes(work)
    tables = {p for p in before if p.startswith("results/report/")}
    assert {f"results/report/tables/{t}.csv" for t in ("ablation", "canonical_quality", "tau_sensitivity",
                                                       "feasibility_sensitivity", "rate_robustness",
                                                       "large_results", "datasets",
                                                       "unobserved_quality")} <= tables

    # nothing to do on an unchanged config
    dry = snakemake(work, "--dry-run", configfile=tiny_config(tmp_path))
    assert "Nothing to be done" in dry.stdout + dry.stderr

    # change the threshold of the `sharp` ablation only
    changed = tiny_config(tmp_path, **{"variants.battus-z.sharp.tau": 0.75})
    dry = snakemake(work, "--dry-run", configfile=changed)
    assert re.search(r"params have changed since last execution:\s+reconstruct\b", dry.stdout + dry.stderr)
    plan = planned_outputs(dry)
    assert plan.pop("reconstruct") == {  # each job scores the prediction it makes
        "results/ba-si/battus-z/sharp/prediction.h5", "results/ba-si/battus-z/sharp/score.json",
        "results/ba-sir/battus-z/sharp/prediction.h5", "results/ba-sir/battus-z/sharp/score.json"}
    assert set(plan.pop("table_ablation")) >= {"results/report/tables/ablation.csv"}
    assert plan.pop("scores_csv") == {"results/scores.csv"}  # every score, in one long table
    # the report's first page quotes the run's wall time and the random control's scores
    assert plan.pop("run_summary") == {"results/report/summary.rst", "results/report/summary.html"}
    plan.pop("all", None)
    assert plan == {}, f"unexpected jobs: {sorted(plan)}"

    # run it for real: exactly those files change
    snakemake(work, configfile=changed)
    after = mtimes(work)
    rewritten = {p for p in before if after.get(p) != before[p]}
    assert rewritten == {
        "results/ba-si/battus-z/sharp/prediction.h5", "results/ba-sir/battus-z/sharp/prediction.h5",
        "results/ba-si/battus-z/sharp/score.json", "results/ba-sir/battus-z/sharp/score.json",
        "results/report/tables/ablation.csv", "results/report/tables/ablation.md",
        "results/report/tables/ablation.tex", "results/report/tables/ablation.html", "results/scores.csv",
        "results/report/summary.rst", "results/report/summary.html",
    }
    params = json.loads((work / "results/ba-sir/battus-z/sharp/score.json").read_text())["params"]
    assert params["tau"] == 0.75

    # `snakemake <file>` / -R reruns one ablation alone
    target = "results/ba-si/battus-z/map/prediction.h5"
    plan = planned_outputs(snakemake(work, "--dry-run", "-R", "reconstruct", "--until", target, target,
                                     configfile=changed))
    assert plan.get("reconstruct") == {target, target.replace("prediction.h5", "score.json")}


# ---------------------------------------------------------------------------
# (b) a reconstruction killed mid-run leaves nothing corrupt; the next run completes


def _wait_for(predicate, timeout: float, what: str) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM],
                         ids=["SIGKILL-all", "SIGINT-all", "SIGTERM-snakemake"])
def test_kill_mid_run_then_resume(tmp_path, sig):
    """SIGKILL to Snakemake and its jobs (a lost node), SIGINT to all (Ctrl-C), SIGTERM to
    Snakemake (graceful: it lets running jobs finish and starts no new ones)."""
    from battus.io import read_history, read_prediction

    work = tmp_path / "run"
    work.mkdir()
    cfg = ROOT / "config/test/slow.yaml"
    slow = work / "results/ba-sir/battus/default/prediction.h5"
    log = work / "results/logs/reconstruct/ba-sir/battus/default.log"
    cmd = [SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(work), "--cores", "2", "--configfile", str(cfg), "--nocolor"]
    # A test run started in the background of a non-interactive shell (nohup ... & in a script)
    # inherits SIGINT ignored, and an ignored signal stays ignored across exec: Snakemake and its
    # jobs would never see the Ctrl-C. Start Snakemake with the disposition a terminal gives it.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        _wait_for(lambda: log.is_file() and "fitting rates" in log.read_text(), 150, "the slow fit to start")
        time.sleep(0.5)
        assert proc.poll() is None, "the workflow finished before it could be killed"
        if sig == signal.SIGTERM:
            os.kill(proc.pid, sig)
        else:
            os.killpg(proc.pid, sig)
        proc.wait(timeout=300)  # SIGTERM lets the slow fit finish, slower with other test files beside it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    time.sleep(1.0)  # let orphaned children (SIGKILL case) die
    if sig == signal.SIGTERM:  # graceful: the running job was allowed to finish, completely
        assert not slow.exists() or read_prediction(slow)["states"].ndim == 2
        assert not (work / "results/report/tables/canonical_quality.csv").exists()
    else:
        assert not slow.exists(), "a killed reconstruction must not leave its output"

    if sig == signal.SIGKILL:  # a hard kill leaves Snakemake's lock: unlock, as docs/workflow.md says
        snakemake(work, "--unlock", configfile=cfg)
    snakemake(work, "--rerun-incomplete", configfile=cfg, timeout=400)
    assert slow.exists()
    assert read_prediction(slow)["states"].shape == read_history(work / "results/ba-sir/history.h5").truth.shape
    leftovers = [p for p in (work / "results").rglob("*.tmp")]
    assert leftovers == [], f"temporary files left behind: {leftovers}"
    for score_file in (work / "results").rglob("score.json"):
        json.loads(score_file.read_text())
    dry = snakemake(work, "--dry-run", configfile=cfg)
    assert "Nothing to be done" in dry.stdout + dry.stderr


# ---------------------------------------------------------------------------
# (c) the schema stops a wrong key or value before any job runs


@pytest.mark.parametrize("change, needle", [
    ({"experiments.ablation.datasetz": ["ba-si"]}, "datasetz"),
    ({"variants.battus-z.sharp.tua": 0.7}, "tua"),
    ({"variants.battus-z.sharp.tau": 1.5}, "1.5"),
    ({"datasets.ba-si.model": "seir"}, "seir"),
    ({"backend": "tpu"}, "tpu"),
])
def test_schema_rejects_wrong_key_or_value(tmp_path, change, needle):
    work = tmp_path / "run"
    work.mkdir()
    proc = snakemake(work, configfile=tiny_config(tmp_path, **change), check=False)
    assert proc.returncode != 0
    err = proc.stdout + proc.stderr
    assert needle in err, err[-3000:]
    assert not (work / "results").exists(), "no job may run on an invalid config"


def test_unknown_dataset_reference_is_rejected(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    proc = snakemake(work, configfile=tiny_config(tmp_path, **{"experiments.tau.datasets": ["nope"]}), check=False)
    assert proc.returncode != 0
    assert "nope" in proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# (d) lint and formatting


def test_snakemake_lint_is_clean():
    proc = subprocess.run([SNAKEMAKE, "-s", str(SNAKEFILE), "-d", str(ROOT), "--lint"],
                          capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert "Lints for" not in out, out[-3000:]


def test_snakefmt_check_is_clean():
    snakefmt = str(_BIN / "snakefmt") if (_BIN / "snakefmt").exists() else (shutil.which("snakefmt") or "snakefmt")
    if shutil.which(snakefmt) is None:
        pytest.skip("snakefmt is not installed")
    proc = subprocess.run([snakefmt, "--check", str(SNAKEFILE), str(ROOT / "rules")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# (e) the whole paper plans offline


def test_paper_dry_run_offline(tmp_path):
    # no mirror: the shared one lacks the four large SNAP graphs, which stops a run through it at once
    env = {"BATTUS_MIRROR": ""}
    proc = snakemake(tmp_path, "--dry-run", configfile=ROOT / "config/paper.yaml", env=env)
    out = proc.stdout + proc.stderr
    total = int(re.search(r"^total\s+(\d+)", out, re.M).group(1))
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert int(stats["download"]) == 16  # 12 DITTO exports + 4 SNAP graphs
    assert int(stats["edgelist_graph"]) == 4
    assert int(stats["simulate"]) == (8 + 16) * 5  # large SI/SIR + rate robustness, each at 5 seeds
    assert int(stats["import_history"]) == 12
    assert total > 400
    for table in ("datasets", "ablation", "canonical_quality", "unobserved_quality", "feasibility_sensitivity",
                  "tau_sensitivity", "rate_robustness", "large_results"):
        assert f"results/paper/report/tables/{table}.csv" in out


def test_paper_on_standins_dry_run(tmp_path):
    """config/test/paper-standins.yaml over the paper's config: the same datasets, seeds and tables,
    the four large SNAP graphs replaced by generated stand-ins (nothing large to download)."""
    both = [str(ROOT / "config/paper.yaml"), str(ROOT / "config/test/paper-standins.yaml")]
    proc = snakemake(tmp_path, "--dry-run", "--configfile", *both, env={"BATTUS_MIRROR": ""})
    plan = planned_outputs(proc)
    out = proc.stdout + proc.stderr
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert int(stats["download"]) == 12 and "edgelist_graph" not in stats  # the DITTO exports only
    assert {f"results/paper-standins/graphs/{g}-like.h5" for g in
            ("web-stanford", "web-google", "orkut", "livejournal")} <= plan["generate_graph"]
    assert int(stats["simulate"]) == (8 + 16) * 5  # as the paper's: large SI/SIR + rate robustness
    for large in ("orkut-sir", "livejournal-si"):
        assert f"results/paper-standins/{large}/battus/default/score.json" in plan["reconstruct"]
    assert "results/paper-standins/report/tables/large_results.csv" in out


def test_default_config_dry_run(tmp_path):
    proc = snakemake(tmp_path, "--dry-run")
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout + proc.stderr, re.M))
    assert int(stats["reconstruct"]) > 50 and int(stats["table_ablation"]) == 1
    # no profile is read unless asked for: Snakemake would announce it above a refusal's one line
    assert "Using workflow specific profile" not in proc.stdout + proc.stderr
    for profile in ("local", "slurm"):
        assert yaml.safe_load((ROOT / f"profiles/{profile}/config.yaml").read_text())["scheduler"] == "greedy"


def test_default_run_walks_the_snap_chain(tmp_path):
    """The example SNAP edge list goes download -> edgelist_graph -> simulate -> reconstruct (and
    score) -> tables; the real Oregon2 file joins only when a mirror is set."""
    proc = snakemake(tmp_path, "--dry-run", env={"BATTUS_MIRROR": ""})
    plan = planned_outputs(proc)
    assert "resources/downloads/example/edges.txt.gz" in plan["download"]
    assert "results/graphs/example.h5" in plan["edgelist_graph"]
    for model in ("si", "sir"):
        assert f"results/example-{model}/history.h5" in plan["simulate"]
        assert f"results/example-{model}/battus-z/default/prediction.h5" in plan["reconstruct"]
        assert f"results/example-{model}/battus-z/default/score.json" in plan["reconstruct"]
    assert not any("oregon2" in p for outputs in plan.values() for p in outputs)
    if (SHARED / "snap/oregon2_010526.txt.gz").is_file():
        plan = planned_outputs(snakemake(tmp_path, "--dry-run", env={"BATTUS_MIRROR": str(SHARED)}))
        assert "resources/downloads/snap/oregon2_010526.txt.gz" in plan["download"]
        assert "results/graphs/oregon2.h5" in plan["edgelist_graph"]
        assert "results/oregon2-sir/battus/default/score.json" in plan["reconstruct"]


def test_example_edge_list_is_cleaned_by_the_snap_rule(tmp_path):
    """The file: download (relative to the workflow, checksummed, never from the mirror) and the
    SNAP cleaning: 12 self-loops and 40 duplicate lines dropped, the 20-vertex component left out."""
    snakemake(tmp_path, "results/graphs/example.h5", env={"BATTUS_MIRROR": str(tmp_path / "empty")})
    log = (tmp_path / "results/logs/graph/example.log").read_text()
    assert "dropped 12 self-loops and 40 duplicate edges" in log
    assert "n=1500 " in log


@pytest.mark.slow
def test_archive_reruns_in_a_fresh_folder(tmp_path):
    """The archive holds the code at the commit, the config used, results, downloads, a rebuilt
    report, pip freeze and a manifest; unpacked elsewhere, the manifest verifies, `snakemake -n`
    has nothing to do and the report rebuilds."""
    import hashlib
    import tarfile

    work = tmp_path / "run"
    work.mkdir()
    experiments = {"datasets": {"datasets": ["ba-si", "ba-sir"]},
                   "canonical": {"si": ["ba-si"], "sir": ["ba-sir"], "methods": [["battus-z", "default"]]}}
    config = tiny_config(tmp_path, experiments=experiments)
    snakemake(work, "all", "archive", "--configfile", str(config), timeout=600)
    packed = work / "results/archive/battus-tiny.tar.gz"
    fresh = tmp_path / "fresh"
    with tarfile.open(packed) as tar:
        tar.extractall(fresh, filter="data")
    root = fresh / "battus-tiny"
    lines = (root / "MANIFEST.sha256").read_text().splitlines()
    listed = {}
    for line in lines:
        digest, name = line.split("  ", 1)
        listed[name] = digest
        assert hashlib.sha256((root / name).read_bytes()).hexdigest() == digest, name
    on_disk = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert on_disk - set(listed) == {"MANIFEST.sha256"}
    for name in ("Snakefile", "rules/archive.smk", "workflow_scripts/archive.py", "src/battus/__init__.py",
                 "envs/battus.yaml", "pyproject.toml", "README.md", "config-used.yaml", "report.html",
                 "environment/pip-freeze.txt", "results/ba-si/battus-z/default/score.json",
                 "results/report/tables/canonical_quality.csv"):
        assert name in listed, name
    record = json.loads((root / "ARCHIVE.json").read_text())
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert record["commit"] == head.stdout.strip() and isinstance(record["dirty"], bool)
    assert (root / "config-used.yaml").read_bytes() == config.read_bytes()
    cmd = [SNAKEMAKE, "-s", str(root / "Snakefile"), "-d", str(root), "--cores", "1", "--nocolor",
           "--configfile", str(root / "config-used.yaml")]
    proc = subprocess.run(cmd + ["--dry-run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "Nothing to be done" in proc.stdout + proc.stderr, proc.stdout[-3000:]
    proc = subprocess.run(cmd + ["--report", "rebuilt.html"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and (root / "rebuilt.html").stat().st_size > 10_000, proc.stderr[-3000:]


# ---------------------------------------------------------------------------
# (f) the paper check on the CI run's table (when CI has produced it)


def test_check_paper_tables_on_ci_output():
    table = ROOT / "results/ci/report/tables/canonical_quality.csv"
    if not table.exists():
        pytest.skip("run config/test/ci.yaml first (see docs/workflow.md)")
    proc = subprocess.run([sys.executable, str(ROOT / "workflow_scripts/check_paper_tables.py"), str(table)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------
# (g) the plan: options from the package's presets, sweep variants built once, report items


def validated(config: dict) -> dict:
    from snakemake.utils import validate

    validate(config, str(ROOT / "config/schemas/config.schema.yaml"))  # fills in the defaults
    return config


def tiny_plan(**changes):
    from battus.suite.experiments import Plan

    cfg = yaml.safe_load((ROOT / "config/test/tiny.yaml").read_text())
    for dotted, value in changes.items():
        node = cfg
        *keys, last = dotted.split(".")
        for k in keys:
            node = node[k]
        node[last] = value
    return Plan(validated(cfg))


def test_plan_options_come_from_the_package_presets():
    from battus.pipeline import method_options

    plan = tiny_plan()
    for method in ("battus", "battus-z"):
        options = method_options(method)
        assert plan.presets[method] == {k: getattr(options, k) for k in plan.presets[method]}
    z = plan.options("ba-si", "battus-z", "default")
    assert z == {"backend": "cpu", "backward": True, "beta_i": 0.1, "causal": False, "decoder": "threshold",
                 "fit": False, "method": "battus-z", "projection": True, "repeat_seconds": 1, "repeats": 5,
                 "posteriors": True, "reset": False, "schedule": None,
                 "tau": 0.65}  # SI: no recovery rate; timing from `timing`; posteriors for `calibration`
    fitted = plan.options("ba-sir", "battus", "default")
    assert fitted["fit"] and fitted["grid_points"] == 4 and fitted["rate_upper"] == 0.5
    assert not {"beta_i", "beta_r", "tau"} & set(fitted)  # fitted rates, MAP decoder
    # spelling out a preset value is the preset: nothing reruns
    spelled = tiny_plan(**{"variants.battus-z.sharp.tau": 0.65})
    default = spelled.options("ba-sir", "battus-z", "default")
    assert default.pop("posteriors")  # the calibration experiment's run keeps its posteriors; `sharp` is not in it
    assert spelled.options("ba-sir", "battus-z", "sharp") == default


def test_plan_builds_sweep_variants_once_without_parsing_names():
    from battus.suite.experiments import ConfigError

    plan = tiny_plan(**{"experiments.tau.method": "battus"})
    assert plan.overrides("battus", "tau-0.65") == {"decoder": "threshold", "tau": 0.65}
    assert plan.options("ba-sir", "battus", "tau-0.60")["tau"] == 0.6
    grid = tiny_plan()
    assert grid.rates_variant("battus-z", 0.1, 0.1) == "default"
    assert grid.overrides("battus-z", "rates-0.10-0.20") == {"fit": False, "beta_i": 0.1, "beta_r": 0.2}
    assert grid.tau_variant("battus-z", 0.65) == "default"
    with pytest.raises(ConfigError, match="tau-0.42"):
        grid.overrides("battus-z", "tau-0.42")  # not swept by this config


def test_report_items_show_only_their_own_experiments():
    from battus.suite.report import report_made, report_runs, report_spec

    plan = tiny_plan()
    assert report_made(plan, "table") == ["datasets", "ablation", "canonical_quality", "unobserved_quality",
                                          "paper_comparison", "ditto_protocol", "ditto_win_loss", "calibration",
                                          "feasibility_sensitivity", "tau_sensitivity", "rate_robustness",
                                          "large_results"]
    assert "reliability" in report_made(plan, "figure")
    assert "history_drawing" in report_made(plan, "figure")
    assert set(report_spec("ablation", plan)["experiments"]) == {"ablation"}
    assert set(report_spec("feasibility_sensitivity", plan)["experiments"]) == {"canonical", "rate_grid"}
    # the methods under test (the example plug-in included), not the controls and baselines
    assert report_runs("history_drawing", plan) == [("ba-sir", "battus", "default"),
                                                    ("ba-sir", "battus-z", "default"),
                                                    ("ba-sir", "forward-fill", "default")]
    assert report_spec("canonical_quality", plan)["controls"] == ["random/default", "truth/default"]
    no_tau = yaml.safe_load((ROOT / "config/test/tiny.yaml").read_text())
    del no_tau["experiments"]["tau"]
    from battus.suite.experiments import Plan

    plan = Plan(validated(no_tau))
    assert "tau_sensitivity" not in report_made(plan, "table") and "tau_curves" not in report_made(plan, "figure")


# ---------------------------------------------------------------------------
# CUDA code paths through Numba's CUDA simulator (no GPU needed)


@pytest.mark.slow
def test_cuda_paths_through_simulator(tmp_path):
    work = tmp_path / "run"
    work.mkdir()
    snakemake(work, configfile=ROOT / "config/test/cudasim.yaml", env={"NUMBA_ENABLE_CUDASIM": "1"},
              timeout=600)
    for variant in ("default", "causal"):
        record = json.loads((work / f"results/ba-sir/battus-z/{variant}/score.json").read_text())
        assert record["backend"] == "cuda", record["backend"]
        assert 0.5 < record["hermes"]["f1"] <= 1.0
    table = (work / "results/report/tables/large_results.csv").read_text()
    assert "cuda" in table


def test_ditto_protocol_runs_every_kind_of_method_on_the_final_frame():
    plan = tiny_plan()
    runs = plan.runs("ditto_protocol")
    assert {v for _, _, v in runs} == {"final"} and {m for _, m, _ in runs} >= {"battus-z", "forward-fill", "truth"}
    for d, m, v in runs:
        assert plan.options(d, m, v)["schedule"] == "final", (m, v)
        assert plan.run_label(m, v) == plan.run_label(m, "default")
    # the benchmark protocol's runs keep the file's own observations
    assert plan.options("ba-si", "forward-fill", "default")["schedule"] is None
    assert plan.command("forward-fill") == "run-method" and plan.command("truth") == "baseline"


def test_calibration_runs_keep_their_posteriors():
    plan = tiny_plan()
    assert plan.options("ba-sir", "battus", "default")["posteriors"] is True  # in the calibration experiment
    assert "posteriors" not in plan.options("er-sir", "battus-z", "default")  # only in `large`
