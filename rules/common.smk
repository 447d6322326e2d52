"""Configuration validation, derived experiment lists, paths and input functions."""

import math
import os
import re

from snakemake.utils import validate

validate(config, "../config/schemas/config.schema.yaml")


def _check(condition, message):
    if not condition:
        raise ValueError(f"config: {message}")


# ---------------------------------------------------------------------------
OUT = config["results"].rstrip("/")  # every output of this configuration lives here
# The mirror (config `mirror`, overridden by BATTUS_MIRROR, relative paths from
# the run folder) is read by the download script only, not passed as a param:
# switching between the network and a mirror reruns nothing.

DOWNLOADS = config["downloads"]
GRAPHS = config["graphs"]
EXPERIMENTS = config["experiments"]
# published rows live in the workflow, not in the run folder
for _key, _path in config["published"].items():
    if not os.path.isabs(_path):
        config["published"][_key] = os.path.join(workflow.basedir, _path)
FIT = config["fit"]

# Method presets, mirroring battus.infer.method_options (used to normalise
# params so that spelling out a preset value reruns nothing).
PRESETS = {
    "battus": dict(
        fit=True,
        reset=True,
        backward=True,
        decoder="map",
        tau=0.65,
        beta_i=0.1,
        beta_r=0.1,
        projection=True,
        causal=False,
    ),
    "battus-z": dict(
        fit=False,
        reset=False,
        backward=True,
        decoder="threshold",
        tau=0.65,
        beta_i=0.1,
        beta_r=0.1,
        projection=True,
        causal=False,
    ),
}
METHODS = tuple(PRESETS)
METHOD_LABELS = {"battus": "Battus", "battus-z": "Battus-Z"}
FIT_KEYS = ("grid_points", "refine_points", "refine_rounds", "rate_lower", "rate_upper")


def _rate_tag(x):
    return f"{float(x):.2f}"


# ---------------------------------------------------------------------------
# Datasets: those of the config plus the resimulated rate-robustness ones.
DATASETS = {name: dict(spec) for name, spec in config["datasets"].items()}
RATE_ROBUSTNESS = []  # (dataset, topology label, model, beta_i, beta_r)
if "rate_robustness" in EXPERIMENTS:
    _rr = EXPERIMENTS["rate_robustness"]
    for _label, _topo in _rr["topologies"].items():
        for _model in _rr["models"]:
            for _bi, _br in _rr["rates"]:
                _name = f"rr-{_label}-{_model}-{_rate_tag(_bi)}-{_rate_tag(_br)}"
                _spec = dict(
                    model=_model,
                    T=_rr["T"],
                    n0=_rr["n0"],
                    beta_i=float(_bi),
                    beta_r=float(_br),
                    seed=_rr["seed"],
                    sim_backend="cpu",
                    schedule="benchmark",
                    large=False,
                    group="Rate robustness",
                    graph_kind="Synth.",
                    diffusion_kind="Synth.",
                    label=f"{_label.upper()}--{_model.upper()} ({_rate_tag(_bi)}, {_rate_tag(_br)})",
                )
                if "graph" in _topo:
                    _spec["graph"] = _topo["graph"]
                else:
                    _spec["topology"] = _topo["dataset"]
                DATASETS[_name] = _spec
                RATE_ROBUSTNESS.append((_name, _label, _model, float(_bi), float(_br)))

IMPORTED = sorted(d for d, s in DATASETS.items() if "import" in s)
SIMULATED = sorted(d for d, s in DATASETS.items() if "import" not in s)
GENERATED_GRAPHS = sorted(g for g, s in GRAPHS.items() if "generator" in s)
EDGELIST_GRAPHS = sorted(g for g, s in GRAPHS.items() if "download" in s)

for _d, _s in DATASETS.items():
    if "import" in _s:
        _check(
            _s["import"] in DOWNLOADS,
            f"datasets.{_d}.import: no download named {_s['import']!r}",
        )
    elif "graph" in _s:
        _check(
            _s["graph"] in GRAPHS,
            f"datasets.{_d}.graph: no graph named {_s['graph']!r}",
        )
    else:
        _check(
            _s["topology"] in DATASETS,
            f"datasets.{_d}.topology: no dataset named {_s['topology']!r}",
        )
for _g, _s in GRAPHS.items():
    if "download" in _s:
        _check(
            _s["download"] in DOWNLOADS,
            f"graphs.{_g}.download: no download named {_s['download']!r}",
        )
    elif _s["generator"] == "ba":
        _check("m" in _s and "n" in _s, f"graphs.{_g}: the ba generator needs n and m")
    elif _s["generator"] == "scale":
        _check("preset" in _s, f"graphs.{_g}: the scale generator needs preset")
    else:
        _check("n" in _s, f"graphs.{_g}: the {_s['generator']} generator needs n")
        _check(
            "edges" in _s, f"graphs.{_g}: the {_s['generator']} generator needs edges"
        )


wildcard_constraints:
    dataset=r"[A-Za-z0-9][A-Za-z0-9._-]*",
    method="|".join(METHODS),
    variant=r"[A-Za-z0-9][A-Za-z0-9._-]*",


def _alternatives(names):
    """A regex matching exactly these names (never matching when empty)."""
    return "|".join(re.escape(x) for x in names) if names else "(?!x)x"


# ---------------------------------------------------------------------------
# Variants (ablations). Named ones come from the config; the tau sweep and the
# rate grid generate tau-X and rates-BI-BR. A generated variant equal to the
# preset is the preset's own `default` run, so it is computed once.
VARIANTS = {m: dict(config["variants"].get(m, {})) for m in METHODS}


def tau_variant(method, tau):
    if method == "battus-z" and math.isclose(tau, PRESETS[method]["tau"]):
        return "default"
    return f"tau-{_rate_tag(tau)}"


def rates_variant(method, beta_i, beta_r):
    preset = PRESETS[method]
    if (
        not preset["fit"]
        and math.isclose(beta_i, preset["beta_i"])
        and math.isclose(beta_r, preset["beta_r"])
    ):
        return "default"
    return f"rates-{_rate_tag(beta_i)}-{_rate_tag(beta_r)}"


def variant_overrides(method, variant):
    """The options a (method, variant) changes relative to the method preset."""
    if variant in VARIANTS[method]:
        return {k: v for k, v in VARIANTS[method][variant].items() if k != "label"}
    if variant == "default":
        return {}
    match = re.fullmatch(r"tau-([0-9.]+)", variant)
    if match:
        extra = {"decoder": "threshold"} if method == "battus" else {}
        return {**extra, "tau": float(match[1])}
    match = re.fullmatch(r"rates-([0-9.]+)-([0-9.]+)", variant)
    if match:
        return {"fit": False, "beta_i": float(match[1]), "beta_r": float(match[2])}
    raise ValueError(
        f"unknown variant {variant!r} of method {method!r}: define it under "
        f"variants.{method} (or use tau-X / rates-BI-BR)"
    )


def variant_label(method, variant):
    spec = VARIANTS[method].get(variant, {})
    return spec.get("label", f"{METHOD_LABELS[method]} {variant}")


def reconstruct_options(wildcards):
    """Every knob of one reconstruction: the full effective options, normalised and sorted."""
    method = wildcards.method
    overrides = variant_overrides(method, wildcards.variant)
    options = {
        **PRESETS[method],
        **{k: v for k, v in overrides.items() if k not in FIT_KEYS},
    }
    if options["fit"]:
        options.update({k: overrides.get(k, FIT[k]) for k in FIT_KEYS})
        del options["beta_i"], options["beta_r"]  # fitted, not given
    elif DATASETS[wildcards.dataset].get("model") == "si":
        del options["beta_r"]  # SI ignores the recovery rate
    if options["decoder"] == "map":
        del options["tau"]  # the MAP decoder ignores tau
    options["schedule"] = overrides.get("schedule")
    options["backend"] = config["backend"]
    return dict(sorted(options.items()))


# ---------------------------------------------------------------------------
# Paths.
def history(dataset):
    return f"{OUT}/{dataset}/history.h5"


def prediction(dataset, method, variant):
    return f"{OUT}/{dataset}/{method}/{variant}/prediction.h5"


def score(dataset, method, variant):
    return f"{OUT}/{dataset}/{method}/{variant}/score.json"


def graph_file(graph):
    return f"{OUT}/graphs/{graph}.h5"


def simulation_graph(wildcards):
    spec = DATASETS[wildcards.dataset]
    if "graph" in spec:
        return graph_file(spec["graph"])
    return history(spec["topology"])


# ---------------------------------------------------------------------------
# Job sizes for cluster resources: (n, arcs, T) from the config where known.
def job_size(dataset):
    spec = DATASETS[dataset]
    T = spec.get("T", 40)
    if "import" in spec:
        return 20_000, 100_000, T
    if "topology" in spec:
        return job_size(spec["topology"])[:2] + (T,)
    g = GRAPHS[spec["graph"]]
    if g.get("generator") == "scale":
        n, arcs = {
            "web-stanford": (255_265, 2_234_572),
            "web-google": (855_802, 5_066_842),
            "orkut": (3_072_441, 234_370_166),
            "livejournal": (4_843_953, 68_466_754),
        }[g["preset"]]
        return n, arcs, T
    if "generator" in g:
        n = g["n"]
        edges = g.get("edges", g.get("m", 1) * n)
        return n, 2 * edges, T
    paper = g.get("paper", {})
    n = paper.get("n", 1_000_000)
    arcs = paper.get("edges", 10_000_000) * (1 if g["directed"] else 2)
    return n, arcs, T


def uses_gpu(wildcards):
    return (
        1 if DATASETS[wildcards.dataset]["large"] and config["backend"] != "cpu" else 0
    )


def reconstruct_mem_mb(wildcards):
    n, arcs, T = job_size(wildcards.dataset)
    # CSR (int32 + int64 rows) + forward, posterior and message fields
    return int(1000 + (12 * arcs + 8 * n + 64 * (T + 1) * n) / 1e6)


def reconstruct_runtime(wildcards):
    n, arcs, T = job_size(wildcards.dataset)
    passes = 800 if reconstruct_options(wildcards)["fit"] else 4
    seconds = (
        T * (n + arcs) * passes / 2e8
    )  # ~2e8 arc visits per second on one CPU socket
    if uses_gpu(wildcards):
        seconds /= 20
    return int(min(48 * 60, 10 + math.ceil(seconds / 60)))


def simulate_mem_mb(wildcards):
    n, arcs, T = job_size(wildcards.dataset)
    return int(1000 + (12 * arcs + 8 * n + 2 * (T + 1) * n) / 1e6)


def job_threads(wildcards):
    # Snakemake caps this at --cores locally; on SLURM it becomes --cpus-per-task
    return config["large_threads"] if DATASETS[wildcards.dataset]["large"] else 1


# ---------------------------------------------------------------------------
# Experiments: which scores each table needs.
def runs_canonical():
    spec = EXPERIMENTS.get("canonical")
    if not spec:
        return []
    return [(d, m, v) for d in spec["si"] + spec["sir"] for m, v in spec["methods"]]


def runs_ablation():
    spec = EXPERIMENTS.get("ablation")
    if not spec:
        return []
    return [
        (d, r["method"], r["variant"]) for r in spec["rows"] for d in spec["datasets"]
    ]


def runs_tau():
    spec = EXPERIMENTS.get("tau")
    if not spec:
        return []
    return [
        (d, spec["method"], tau_variant(spec["method"], t))
        for t in spec["taus"]
        for d in spec["datasets"]
    ]


def runs_rate_grid():
    spec = EXPERIMENTS.get("rate_grid")
    if not spec:
        return []
    return [
        (d, spec["method"], rates_variant(spec["method"], bi, br))
        for bi in spec["beta_i"]
        for br in spec["beta_r"]
        for d in spec["datasets"]
    ]


def runs_rate_robustness():
    spec = EXPERIMENTS.get("rate_robustness")
    if not spec:
        return []
    method, variant = spec["method"]
    return [(d, method, variant) for d, *_ in RATE_ROBUSTNESS]


def runs_large():
    spec = EXPERIMENTS.get("large")
    if not spec:
        return []
    return [(d, m, v) for d in spec["datasets"] for m, v in spec["methods"]]


def runs_extra():
    spec = EXPERIMENTS.get("extra")
    if not spec:
        return []
    return [(d, m, v) for d in spec["datasets"] for m, v in spec["methods"]]


def runs_all():
    seen = {}
    for fn in (
        runs_canonical,
        runs_ablation,
        runs_tau,
        runs_rate_grid,
        runs_rate_robustness,
        runs_large,
        runs_extra,
    ):
        for run in fn():
            seen.setdefault(run, None)
    return list(seen)


for _d, _m, _v in runs_all():
    _check(_d in DATASETS, f"experiments: no dataset named {_d!r}")
    variant_overrides(_m, _v)  # raises on an unknown variant


def score_files(runs):
    return [score(*r) for r in runs]


# Tables and figures: name -> runs they read (None: not made by this config).
TABLE_RUNS = {
    "datasets": [] if "datasets" in EXPERIMENTS else None,
    "ablation": runs_ablation() or None,
    "canonical_quality": runs_canonical() or None,
    "unobserved_quality": runs_canonical() or None,
    "feasibility_sensitivity": (runs_canonical() + runs_rate_grid()) or None,
    "tau_sensitivity": runs_tau() or None,
    "rate_robustness": runs_rate_robustness() or None,
    "large_results": runs_large() or None,
}
TABLES = [t for t, runs in TABLE_RUNS.items() if runs is not None]
TABLE_FORMATS = ("csv", "md", "tex")

FIGURE_RUNS = {
    "tau_curves": runs_tau() or None,
    "rate_grid_heatmaps": runs_rate_grid() or None,
    "canonical_bars": runs_canonical() or None,
    "cv_vs_f1": runs_canonical() or None,
    "timing": (runs_canonical() + runs_large()) or None,
    "history_drawing": None,
}
if "canonical" in EXPERIMENTS and EXPERIMENTS["canonical"].get("drawing"):
    FIGURE_RUNS["history_drawing"] = [
        (EXPERIMENTS["canonical"]["drawing"], m, v)
        for m, v in EXPERIMENTS["canonical"]["methods"]
    ]
FIGURES = [f for f, runs in FIGURE_RUNS.items() if runs is not None]


def table_outputs(name):
    return [f"{OUT}/report/tables/{name}.{ext}" for ext in TABLE_FORMATS]


def figure_output(name):
    return f"{OUT}/report/figures/{name}.png"


def report_targets():
    targets = [p for t in TABLES for p in table_outputs(t)]
    targets += [figure_output(f) for f in FIGURES]
    targets += score_files(
        runs_all()
    )  # runs that no table reads (extra) are still made
    return targets


# ---------------------------------------------------------------------------
# Table and figure specifications (params of the report rules): only what
# each one shows, so editing one experiment reruns only its own tables.
TABLE_EXPERIMENTS = {
    "datasets": ["datasets"],
    "ablation": ["ablation"],
    "canonical_quality": ["canonical"],
    "unobserved_quality": ["canonical"],
    "feasibility_sensitivity": ["canonical", "rate_grid"],
    "tau_sensitivity": ["tau"],
    "rate_robustness": ["rate_robustness"],
    "large_results": ["large"],
    "tau_curves": ["tau"],
    "rate_grid_heatmaps": ["rate_grid"],
    "canonical_bars": ["canonical"],
    "cv_vs_f1": ["canonical"],
    "timing": ["canonical", "large"],
    "history_drawing": ["canonical"],
}


def dataset_histories():
    spec = EXPERIMENTS.get("datasets")
    return [history(d) for d in spec["datasets"]] if spec else []


def dataset_info(name):
    spec = DATASETS[name]
    graph = GRAPHS.get(spec.get("graph", ""), {})
    return {
        "label": spec.get("label", name),
        "published": spec.get("published"),
        "group": spec["group"],
        "graph_kind": spec["graph_kind"],
        "diffusion_kind": spec["diffusion_kind"],
        "model": spec.get("model"),
        "paper": graph.get("paper", {}),
    }


def run_label(method, variant):
    if variant == "default":
        return METHOD_LABELS[method]
    return variant_label(method, variant)


def table_spec(name):
    experiments = {
        k: EXPERIMENTS[k] for k in TABLE_EXPERIMENTS[name] if k in EXPERIMENTS
    }
    runs = TABLE_RUNS.get(name) or FIGURE_RUNS.get(name) or []
    names = list(dict.fromkeys([r[0] for r in runs]))
    if name == "datasets":
        names = EXPERIMENTS["datasets"]["datasets"]
    spec = {
        "name": config["name"],
        "experiments": experiments,
        "datasets": {d: dataset_info(d) for d in names},
        "labels": {f"{m}/{v}": run_label(m, v) for _, m, v in runs},
    }
    if "tau" in experiments:
        t = experiments["tau"]
        spec["tau_variants"] = {
            f"{x:.2f}": tau_variant(t["method"], x) for x in t["taus"]
        }
    if "rate_grid" in experiments:
        g = experiments["rate_grid"]
        spec["rate_variants"] = [
            [bi, br, rates_variant(g["method"], bi, br)]
            for bi in g["beta_i"]
            for br in g["beta_r"]
        ]
    if "rate_robustness" in experiments:
        spec["rate_runs"] = [list(r) for r in RATE_ROBUSTNESS]
    return spec


def table_runs(name):
    """The (dataset, method, variant) runs a table or figure reads, without repeats."""
    runs = TABLE_RUNS.get(name) or FIGURE_RUNS.get(name) or []
    return list(dict.fromkeys(tuple(r) for r in runs))


def edgelist_mem_mb(wildcards):
    # int64 endpoint pairs, symmetrised, plus sort/unique buffers: ~100 bytes per edge
    edges = GRAPHS[wildcards.graph].get("paper", {}).get("edges", 10_000_000)
    return int(2000 + 100 * edges / 1e6)


def edgelist_runtime(wildcards):
    edges = GRAPHS[wildcards.graph].get("paper", {}).get("edges", 10_000_000)
    return int(10 + edges / 2e6)


def archive_paths():
    """What the archive packs: this configuration's own outputs (not other configs' folders
    that may live inside `results`), the configs, the published rows and the captions.
    """
    own = ["graphs", "logs", "benchmarks", "report", *DATASETS]
    return [f"{OUT}/{x}" for x in own] + ["config", "data/published", "reports"]
