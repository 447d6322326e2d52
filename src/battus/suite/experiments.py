"""What a workflow configuration asks for: datasets, runs, their options and job sizes.

The Snakemake workflow (``rules/common.smk``) validates its config against
``config/schemas/config.schema.yaml`` (which fills in the defaults) and builds
one :class:`Plan` from it. The plan answers every question the rules ask:
which (dataset, method, variant) runs each experiment needs, the complete
options of one run, and how large its job is. Method presets come from
:func:`battus.pipeline.method_options` and the sizes of the scale presets from
:data:`battus.synth.SCALE_PRESETS`, so nothing here copies the package.
:mod:`battus.suite.report` says which tables and figures a plan makes.

A variant is a named set of option overrides of a method preset:
``default`` (the preset itself), the ablations under ``variants:`` in the
config, and the ones the sweeps generate, ``tau-0.70`` (the tau sweep) and
``rates-0.05-0.20`` (the rate grid). Generated names are built once, with
their overrides, from the sweep's numbers; they are never parsed back.
"""

from __future__ import annotations

import copy
import math
import os
import shlex

from ..baselines import BASELINE_LABELS, BASELINES, CONTROLS
from ..options import method_options
from ..plugins import PLACEHOLDERS
from ..synth import SCALE_PRESETS

# the engine's own methods, presets of battus.pipeline.Options with named ablations (variants)
METHOD_LABELS = {"battus": "Battus", "battus-z": "Battus-Z"}
METHODS = tuple(METHOD_LABELS)
# every method a config may name without defining it: the engine's, the controls and the baselines
BUILTIN_LABELS = METHOD_LABELS | BASELINE_LABELS
# the preset options a variant may override (the fit settings are separate)
PRESET_KEYS = ("fit", "reset", "backward", "decoder", "tau", "beta_i", "beta_r", "projection", "causal")
# config `fit:` keys, as the CLI's reconstruct options (--grid-points, --rate-lower, ...)
FIT_KEYS = ("grid_points", "refine_points", "refine_rounds", "rate_lower", "rate_upper")
EXPERIMENTS = ("canonical", "ditto_protocol", "calibration", "ablation", "tau", "rate_grid", "rate_robustness",
               "large", "extra")
# DITTO's protocol observes the final frame alone; the benchmark's (HERMES's) {floor(T/2), T}
DITTO_SCHEDULE = "final"
IMPORTED_SIZE = (20_000, 100_000)  # (n, arcs) assumed for an imported history before it exists


def preset(method: str) -> dict:
    """The method's preset options (battus.pipeline.method_options) as a plain dict."""
    options = method_options(method)
    return {key: getattr(options, key) for key in PRESET_KEYS}


def plugin_argv(spec: dict) -> list[str]:
    """A plug-in's full command: its own, inside its conda environment or container when it names one."""
    argv = list(spec["command"])
    if spec.get("container"):
        return ["apptainer", "exec", *(["--nv"] if spec["gpu"] else []), spec["container"], *argv]
    if spec.get("conda"):
        return ["conda", "run", "--no-capture-output", "-n", spec["conda"], *argv]
    return argv


def _rate_tag(x: float) -> str:
    return f"{float(x):.2f}"


class ConfigError(ValueError):
    """A configuration that passes the schema but refers to something that does not exist."""

    def __init__(self, message: str):
        super().__init__(f"config: {message}")


def _unknown_placeholders(command: str | list[str]) -> list[str]:
    """The ``{name}`` fields of a plug-in command (a string or an argument list) that
    ``battus run-method`` would refuse."""
    import string

    fields = []
    for arg in [command] if isinstance(command, str) else command:
        try:
            fields += [f for _, f, _, _ in string.Formatter().parse(str(arg)) if f is not None]
        except ValueError:  # an unmatched brace
            return ["(unmatched brace)"]
    return [f for f in fields if f not in PLACEHOLDERS]


def _claim(table: dict, name: str, value: dict, what: str) -> None:
    """Add ``name`` to ``table`` for ``what``; a name already there for something else (two settings
    that print alike, a user's name that a sweep or seed replicate also makes) is refused, naming it."""
    if name in table and table[name] != value:
        raise ConfigError(f"{what} makes {name!r}, which already names something else (two values that "
                          "print alike, or a name of the config's own that a sweep also makes)")
    table.setdefault(name, value)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ConfigError(message)


class Plan:
    """Everything a validated workflow configuration asks for."""

    def __init__(self, config: dict):
        self.name = config["name"]
        self.results = config["results"].rstrip("/")
        self.backend = config["backend"]
        self.devices = [int(d) for d in config.get("devices") or []]  # CUDA ordinals; [] = one, the default
        self.large_threads = config["large_threads"]
        self.fit = config["fit"]
        self.timing = config["timing"]
        self.downloads = config["downloads"]
        self.graphs = dict(config["graphs"])
        self.experiments = copy.deepcopy(config["experiments"])
        self.presets = {m: preset(m) for m in METHODS}
        self.datasets = {name: dict(spec) for name, spec in config["datasets"].items()}
        self.mirror = os.environ.get("BATTUS_MIRROR") or config.get("mirror") or None
        self.skipped = self._drop_mirror_only()
        self.rate_robustness = self._add_rate_robustness_datasets()
        # experiment -> base dataset -> the datasets of its seeds (simulated datasets only)
        self.replicates = self._add_replicates()
        # plug-ins (config `methods`): name -> spec; the labels of every method
        self.plugins = dict(config["methods"])
        self.method_labels = BUILTIN_LABELS | {m: spec["label"] for m, spec in self.plugins.items()}
        # method -> variant -> overrides of the preset; labels of the named ones. Controls, baselines
        # and plug-ins have one variant, `default`.
        self.variants = {m: {"default": {}} for m in self.method_labels}
        self.variant_labels = {m: {} for m in self.method_labels}
        for method, named in config["variants"].items():
            for variant, spec in named.items():
                self.variants[method][variant] = {k: v for k, v in spec.items() if k != "label"}
                if "label" in spec:
                    self.variant_labels[method][variant] = spec["label"]
        self._add_sweep_variants()
        self._calibrated = set(self.runs("calibration"))
        self._check_references()

    # -- datasets ------------------------------------------------------------
    def _drop_mirror_only(self) -> list[str]:
        """Without a mirror, leave out graphs on `mirror_only` downloads, their datasets and runs.

        Returns the names of the datasets left out.
        """
        if self.mirror:
            return []
        graphs = {g for g, s in self.graphs.items()
                  if self.downloads.get(s.get("download", ""), {}).get("mirror_only")}
        gone = {d for d, s in self.datasets.items() if s.get("graph") in graphs}
        for g in graphs:
            del self.graphs[g]
        for d in gone:
            del self.datasets[d]
        for spec in self.experiments.values():
            if not isinstance(spec, dict):
                continue
            for key in ("datasets", "si", "sir"):
                if isinstance(spec.get(key), list):
                    spec[key] = [d for d in spec[key] if d not in gone]
            if spec.get("drawing") in gone:
                spec.pop("drawing")
        return sorted(gone)

    def _add_rate_robustness_datasets(self) -> list[tuple]:
        """Resimulated datasets of the rate-robustness table: (dataset, topology, model, beta_i, beta_r)."""
        spec = self.experiments.get("rate_robustness")
        if not spec:
            return []
        made = []
        for label, topology in spec["topologies"].items():
            for model in spec["models"]:
                for beta_i, beta_r in spec["rates"]:
                    name = f"rr-{label}-{model}-{_rate_tag(beta_i)}-{_rate_tag(beta_r)}"
                    dataset = dict(
                        model=model, T=spec["T"], n0=spec["n0"], beta_i=float(beta_i), beta_r=float(beta_r),
                        seed=spec["seed"], sim_backend="cpu", schedule="benchmark", large=False,
                        group="Rate robustness", graph_kind="Synth.", diffusion_kind="Synth.",
                        label=f"{label.upper()}--{model.upper()} ({_rate_tag(beta_i)}, {_rate_tag(beta_r)})",
                    )
                    if "graph" in topology:
                        dataset["graph"] = topology["graph"]
                    else:
                        dataset["topology"] = topology["dataset"]
                    _claim(self.datasets, name, dataset,
                           f"experiments.rate_robustness: {label} {model} at ({beta_i}, {beta_r})")
                    made.append((name, label, model, float(beta_i), float(beta_r)))
        return made

    @staticmethod
    def replicate_name(dataset: str, seed: int) -> str:
        """The dataset simulated at another seed: ``<dataset>.seed<seed>``."""
        return f"{dataset}.seed{seed}"

    def _add_replicates(self) -> dict[str, dict[str, list[str]]]:
        """The seeds of every experiment that lists `seeds:`: each simulated dataset it reads is
        simulated once per seed (the dataset itself at its own `seed`, `<dataset>.seed<s>` at the
        others); an imported history is fixed data and runs once."""
        out = {}
        for experiment in EXPERIMENTS:
            spec = self.experiments.get(experiment)
            if not spec or not spec.get("seeds"):
                continue
            out[experiment] = {}
            for d in self._experiment_datasets(experiment):
                base = self.datasets.get(d)
                if base is None or "import" in base:
                    continue
                names = []
                for seed in spec["seeds"]:
                    name = d if seed == base.get("seed") else self.replicate_name(d, seed)
                    if name != d:
                        _claim(self.datasets, name, {**base, "seed": int(seed), "replicate_of": d},
                               f"experiments.{experiment}.seeds: {d} at seed {seed}")
                    names.append(name)
                out[experiment][d] = names
        return out

    def _experiment_datasets(self, experiment: str) -> list[str]:
        """The datasets an experiment's runs read, in first-run order (from :meth:`_base_runs`)."""
        return list(dict.fromkeys(d for d, _, _ in self._base_runs(experiment)))

    def base_dataset(self, dataset: str) -> str:
        """The dataset a seed replicate repeats (itself for any other)."""
        return self.datasets[dataset].get("replicate_of", dataset)

    def seed_of(self, dataset: str) -> int | None:
        """The simulation seed of a dataset's history; None for an imported (fixed) one."""
        spec = self.datasets[dataset]
        return None if "import" in spec else spec["seed"]

    def imported(self) -> list[str]:
        return sorted(d for d, s in self.datasets.items() if "import" in s)

    def simulated(self) -> list[str]:
        return sorted(d for d, s in self.datasets.items() if "import" not in s)

    def generated_graphs(self) -> list[str]:
        return sorted(g for g, s in self.graphs.items() if "generator" in s)

    def edgelist_graphs(self) -> list[str]:
        return sorted(g for g, s in self.graphs.items() if "download" in s)

    # -- variants ------------------------------------------------------------
    def tau_variant(self, method: str, tau: float) -> str:
        """The tau sweep's variant; Battus-Z at its own tau is its default run (computed once)."""
        if method == "battus-z" and math.isclose(tau, self.presets[method]["tau"]):
            return "default"
        return f"tau-{_rate_tag(tau)}"

    def rates_variant(self, method: str, beta_i: float, beta_r: float) -> str:
        """The rate grid's variant; a fixed-rate preset at its own rates is its default run."""
        p = self.presets[method]
        if not p["fit"] and math.isclose(beta_i, p["beta_i"]) and math.isclose(beta_r, p["beta_r"]):
            return "default"
        return f"rates-{_rate_tag(beta_i)}-{_rate_tag(beta_r)}"

    @staticmethod
    def ditto_variant(variant: str) -> str:
        """A run under DITTO's protocol (the final frame observed alone): `final`, or `<variant>-final`."""
        return DITTO_SCHEDULE if variant == "default" else f"{variant}-{DITTO_SCHEDULE}"

    def _add_sweep_variants(self) -> None:
        ditto = self.experiments.get("ditto_protocol")
        if ditto:
            for method, variant in ditto["methods"]:
                if method in self.variants and variant in self.variants[method]:
                    _claim(self.variants[method], self.ditto_variant(variant),
                           {**self.variants[method][variant], "schedule": DITTO_SCHEDULE},
                           f"experiments.ditto_protocol: {method} {variant} under the final-frame protocol")
                    # labelled as the run it repeats: the table says which protocol
                    self.variant_labels[method].setdefault(self.ditto_variant(variant), self.run_label(method, variant))
        tau = self.experiments.get("tau")
        if tau:
            method = tau["method"]
            for x in tau["taus"]:
                variant = self.tau_variant(method, x)
                if variant != "default":  # Battus decodes by MAP: the sweep switches it to the threshold
                    extra = {"decoder": "threshold"} if self.presets[method]["decoder"] == "map" else {}
                    _claim(self.variants[method], variant, {**extra, "tau": float(x)},
                           f"experiments.tau.taus: {x}")
        grid = self.experiments.get("rate_grid")
        if grid:
            method = grid["method"]
            for bi in grid["beta_i"]:
                for br in grid["beta_r"]:
                    variant = self.rates_variant(method, bi, br)
                    if variant != "default":
                        _claim(self.variants[method], variant, {"fit": False, "beta_i": float(bi), "beta_r": float(br)},
                               f"experiments.rate_grid: ({bi}, {br})")

    def overrides(self, method: str, variant: str) -> dict:
        """The options a (method, variant) changes relative to the method preset."""
        if method not in self.variants:
            raise ConfigError(f"no method named {method!r}: the built-in ones are {', '.join(BUILTIN_LABELS)}; "
                              f"define a plug-in under methods.{method}")
        if variant not in self.variants[method]:
            raise ConfigError(f"unknown variant {variant!r} of method {method!r}: define it under "
                              f"variants.{method} (or sweep it with experiments.tau / rate_grid)")
        return self.variants[method][variant]

    def options(self, dataset: str, method: str, variant: str) -> dict:
        """Every knob of one reconstruction (the CLI's reconstruct options), normalised and sorted.

        Options a run ignores are dropped (fitted rates, SI's recovery rate,
        the MAP decoder's tau), so spelling out a preset value or editing an
        unused one changes nothing and reruns nothing.
        """
        overrides = self.overrides(method, variant)
        if method in BASELINES:  # `battus baseline`
            return {"method": method, "seed": 0, "schedule": overrides.get("schedule")}
        if method in self.plugins:  # `battus run-method`
            spec = self.plugins[method]
            return {"name": method, "command": shlex.join(plugin_argv(spec)), "threads": spec["threads"],
                    "seed": 0, "time_limit": spec["time_limit"], "schedule": overrides.get("schedule")}
        options = {**self.presets[method], **{k: v for k, v in overrides.items() if k not in FIT_KEYS}}
        if options["fit"]:
            options.update({k: overrides.get(k, self.fit[k]) for k in FIT_KEYS})
            del options["beta_i"], options["beta_r"]  # fitted, not given
        elif self.datasets[dataset].get("model") == "si":
            del options["beta_r"]  # SI ignores the recovery rate
        if options["decoder"] == "map":
            del options["tau"]  # the MAP decoder ignores tau
        options["schedule"] = overrides.get("schedule")
        # the calibration experiment scores posteriors: its runs (wherever else they are read) keep them
        if (dataset, method, variant) in self._calibrated:
            options["posteriors"] = True
        options["backend"] = self.backend
        devices = self.devices_of(dataset, method, variant)
        if devices:  # left out when there are none: a config without `devices` keeps every job's params
            options["devices"] = ",".join(map(str, devices))
        options["method"] = method
        options["repeats"] = self.timing["repeats"]
        options["repeat_seconds"] = self.timing["repeat_seconds"]
        return dict(sorted(options.items()))

    def command(self, method: str) -> str:
        """The `battus` command that makes a method's prediction."""
        if method in BASELINES:
            return "baseline"
        return "run-method" if method in self.plugins else "reconstruct"

    def is_control(self, method: str) -> bool:
        """A positive or negative control: it checks the scorer or sets a floor, and is never ranked."""
        return method in CONTROLS

    def is_yardstick(self, method: str) -> bool:
        """A control or a baseline, not a method under test."""
        return method in BASELINES

    def run_label(self, method: str, variant: str) -> str:
        if variant == "default":
            return self.method_labels[method]
        return self.variant_labels[method].get(variant, f"{self.method_labels[method]} {variant}")

    # -- runs ----------------------------------------------------------------
    def runs(self, experiment: str) -> list[tuple[str, str, str]]:
        """The (dataset, method, variant) runs one experiment scores, in table order; a run on a
        dataset the experiment repeats over seeds (`seeds:`) becomes one run per seed, together."""
        seeded = self.replicates.get(experiment, {})
        return [(r, m, v) for d, m, v in self._base_runs(experiment) for r in seeded.get(d, [d])]

    def _base_runs(self, experiment: str) -> list[tuple[str, str, str]]:
        spec = self.experiments.get(experiment)
        if not spec:
            return []
        if experiment == "canonical":
            return [(d, m, v) for d in spec["si"] + spec["sir"] for m, v in spec["methods"]]
        if experiment == "ditto_protocol":
            return [(d, m, self.ditto_variant(v)) for d in spec["si"] + spec["sir"] for m, v in spec["methods"]]
        if experiment == "ablation":
            return [(d, r["method"], r["variant"]) for r in spec["rows"] for d in spec["datasets"]]
        if experiment == "tau":
            method = spec["method"]
            return [(d, method, self.tau_variant(method, t)) for t in spec["taus"] for d in spec["datasets"]]
        if experiment == "rate_grid":
            method = spec["method"]
            return [(d, method, self.rates_variant(method, bi, br))
                    for bi in spec["beta_i"] for br in spec["beta_r"] for d in spec["datasets"]]
        if experiment == "rate_robustness":
            method, variant = spec["method"]
            return [(d, method, variant) for d, *_ in self.rate_robustness]
        if experiment in ("large", "extra", "calibration"):
            return [(d, m, v) for d in spec["datasets"] for m, v in spec["methods"]]
        raise ValueError(f"unknown experiment {experiment!r}")

    def all_runs(self) -> list[tuple[str, str, str]]:
        """Every run of every experiment, once (runs no table reads, `extra`, included)."""
        return list(dict.fromkeys(run for e in EXPERIMENTS for run in self.runs(e)))

    def dataset_info(self, name: str) -> dict:
        """What the tables print about a dataset."""
        spec = self.datasets[name]
        graph = self.graphs.get(spec.get("graph", ""), {})
        return {
            "label": spec.get("label", name),
            "published": spec.get("published"),
            "group": spec["group"],
            "graph_kind": spec["graph_kind"],
            "diffusion_kind": spec["diffusion_kind"],
            "model": spec.get("model"),
            "paper": graph.get("paper", {}),
        }

    def _check_references(self) -> None:
        for d, s in self.datasets.items():
            if "import" in s:
                _check(s["import"] in self.downloads, f"datasets.{d}.import: no download named {s['import']!r}")
            elif "graph" in s:
                _check(s["graph"] in self.graphs, f"datasets.{d}.graph: no graph named {s['graph']!r}")
            else:
                _check(s["topology"] in self.datasets,
                       f"datasets.{d}.topology: no dataset named {s['topology']!r}")
        for g, s in self.graphs.items():
            if "download" in s:
                _check(s["download"] in self.downloads, f"graphs.{g}.download: no download named {s['download']!r}")
            elif s["generator"] == "ba":
                _check("m" in s and "n" in s, f"graphs.{g}: the ba generator needs n and m")
            elif s["generator"] == "scale":
                _check("preset" in s, f"graphs.{g}: the scale generator needs preset")
            else:
                _check("n" in s, f"graphs.{g}: the {s['generator']} generator needs n")
                _check("edges" in s, f"graphs.{g}: the {s['generator']} generator needs edges")
        for m, spec in self.plugins.items():
            _check(m not in BUILTIN_LABELS, f"methods.{m}: the name of a built-in method")
            bad = _unknown_placeholders(spec["command"])
            _check(not bad, f"methods.{m}.command: unknown placeholder {{{bad[0] if bad else ''}}} "
                            f"(use {', '.join('{' + p + '}' for p in PLACEHOLDERS)})")
        for d, m, v in self.all_runs():
            _check(d in self.datasets, f"experiments: no dataset named {d!r}")
            self.overrides(m, v)
        drawing = self.experiments.get("canonical", {}).get("drawing")
        _check(drawing is None or drawing in self.datasets, f"experiments.canonical.drawing: no dataset {drawing!r}")
        for d in self.experiments.get("datasets", {}).get("datasets", []):
            _check(d in self.datasets, f"experiments.datasets: no dataset named {d!r}")

    # -- job sizes (cluster resources) ---------------------------------------
    def job_size(self, dataset: str) -> tuple[int, int, int]:
        """(n, arcs, T) of a dataset's history, from the config alone (before any file exists)."""
        spec = self.datasets[dataset]
        T = spec.get("T", 40)
        if "import" in spec:
            return (*IMPORTED_SIZE, T)
        if "topology" in spec:
            return (*self.job_size(spec["topology"])[:2], T)
        graph = self.graphs[spec["graph"]]
        if graph.get("generator") == "scale":
            p = SCALE_PRESETS[graph["preset"]]
            return p.n, p.arcs, T
        if "generator" in graph:
            edges = graph.get("edges", graph.get("m", 1) * graph["n"])
            return graph["n"], 2 * edges, T
        paper = graph.get("paper", {})
        arcs = paper.get("edges", 10_000_000) * (1 if graph["directed"] else 2)
        return paper.get("n", 1_000_000), arcs, T

    def uses_gpu(self, dataset: str, method: str | None = None) -> bool:
        """Whether a reconstruction runs on a GPU (and so asks for one): a plug-in when its
        spec says `gpu: true`, never a control or baseline; Battus and Battus-Z with
        backend cuda, or on a `large` dataset with backend auto."""
        if method in self.plugins:
            return bool(self.plugins[method]["gpu"])
        if method in BASELINES:
            return False
        if self.backend == "cuda":
            return True
        return bool(self.datasets[dataset]["large"]) and self.backend == "auto"

    def devices_of(self, dataset: str, method: str, variant: str) -> list[int]:
        """The CUDA devices (config `devices`) of a reconstruction, `battus reconstruct --devices`:
        all of them for fitted Battus on the GPU, which spreads its fit over them; the first for a
        GPU run without a fit, which uses one; none for a job on the CPU, a control, baseline or
        plug-in, or when `devices` is empty (one GPU, the job's default device)."""
        if not self.devices or self.command(method) != "reconstruct" or not self.uses_gpu(dataset, method):
            return []
        fit = self.overrides(method, variant).get("fit", self.presets[method]["fit"])
        return list(self.devices) if fit else self.devices[:1]

    def gpus(self, dataset: str, method: str, variant: str) -> int:
        """GPUs a reconstruction job asks for (the `gpu` resource, on SLURM --gpus): 0 on the
        CPU, else one per device it is given, at least one."""
        if not self.uses_gpu(dataset, method):
            return 0
        return max(1, len(self.devices_of(dataset, method, variant)))

    def threads(self, dataset: str, method: str | None = None) -> int:
        """Threads a job asks for: a plug-in's own `threads`, 1 for a control or baseline,
        else `large_threads` on a `large` dataset and 1 elsewhere (rules/common.smk caps
        them at --cores locally, at the partition's CPUs per node on SLURM)."""
        if method in self.plugins:
            return int(self.plugins[method]["threads"])
        if method in BASELINES:
            return 1
        return self.large_threads if self.datasets[dataset]["large"] else 1

    def reconstruct_mem_mb(self, dataset: str) -> int:
        n, arcs, T = self.job_size(dataset)
        # CSR (int32 + int64 rows) + forward, posterior and message fields
        return int(1000 + (12 * arcs + 8 * n + 64 * (T + 1) * n) / 1e6)

    def reconstruct_runtime(self, dataset: str, method: str, variant: str) -> int:
        """Minutes: ~2e8 arc visits per second on one CPU socket, 20x that on a GPU, capped at 48 h."""
        n, arcs, T = self.job_size(dataset)
        passes = 800 if self.options(dataset, method, variant).get("fit") else 4
        seconds = T * (n + arcs) * passes / 2e8
        if self.uses_gpu(dataset, method):
            seconds /= 20
        return int(min(48 * 60, 10 + math.ceil(seconds / 60)))

    def simulate_mem_mb(self, dataset: str) -> int:
        n, arcs, T = self.job_size(dataset)
        return int(1000 + (12 * arcs + 8 * n + 2 * (T + 1) * n) / 1e6)

    def edgelist_mem_mb(self, graph: str) -> int:
        # int64 endpoint pairs, symmetrised, plus sort/unique buffers: ~100 bytes per edge
        return int(2000 + 100 * self._paper_edges(graph) / 1e6)

    def edgelist_runtime(self, graph: str) -> int:
        return int(10 + self._paper_edges(graph) / 2e6)

    def _paper_edges(self, graph: str) -> int:
        return self.graphs[graph].get("paper", {}).get("edges", 10_000_000)
