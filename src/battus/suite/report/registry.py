"""The report's registry: every table and figure, what it shows, what it reads and how it is made.

Each :class:`ReportItem` declares the config experiments it shows, the kind of input files it
reads (:data:`INPUT_KINDS`), the published rows it compares with, and the function that makes it
from those inputs once read (:class:`ItemData`). Everything the workflow asks is answered from the
entry alone, never from the item's name: whether a plan makes it (:func:`report_made`), the runs
and datasets it reads (:func:`report_runs`, :func:`report_datasets`), the files it reads
(:func:`report_reads`), what it shows (:func:`report_spec`, a param of its rule) and making it
(:func:`make`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from .comparison_tables import (
    table_calibration,
    table_canonical_quality,
    table_datasets,
    table_ditto_protocol,
    table_unobserved_quality,
)
from .figures import (
    figure_history_drawing,
    figure_rate_grid,
    figure_reliability,
    figure_tau_curves,
    save_figure,
)
from .figures_quality import figure_canonical_bars, figure_cv_vs_f1, figure_quality_heatmap, figure_win_loss
from .figures_time import figure_large_timing, figure_time_vs_size, figure_timing
from .paper_comparison import table_paper_comparison
from .scores import history_summary, load_scores, read_measured, read_published
from .sensitivity_tables import (
    table_ablation,
    table_feasibility_sensitivity,
    table_large_results,
    table_rate_robustness,
    table_tau_sensitivity,
)
from .tables import Table, seeds_note, write_table
from .win_loss_tables import table_ditto_win_loss

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from ..experiments import Plan

Run = tuple[str, str, str]  # (dataset, method, variant)

# What an item reads, besides published rows (``published``):
#   scores               the score file of every run of the experiments it shows
#   histories            the history file of every dataset its experiments list (no runs)
#   history+predictions  the history of the dataset its experiment draws (``drawing``) and the
#                        predictions of that experiment's methods under test on it
INPUT_KINDS = ("scores", "histories", "history+predictions")


@dataclass
class ItemData:
    """What one table or figure is made from: its spec and runs, and its input files as read."""

    spec: dict
    runs: list[Run]
    scores: dict[str, dict] = field(default_factory=dict)  # "dataset|method|variant" -> score record
    published: pd.DataFrame | None = None
    histories: list[str | Path] = field(default_factory=list)  # history files, in the order of their datasets
    predictions: list[str | Path] = field(default_factory=list)  # prediction files, one per run
    measured: pd.DataFrame | None = None  # the upstream methods' measured rows (read_measured)


def read_inputs(spec: dict, runs: list[Run], inputs: dict) -> ItemData:
    """An item's input files (``inputs``: ``scores``, ``histories``, ``predictions``, ``published``,
    ``measured``, each present only where the item reads it) as :class:`ItemData`; scores merged over seeds."""
    published = read_published(inputs["published"]) if "published" in inputs else None
    measured = read_measured(inputs["measured"]) if "measured" in inputs else None
    scores = load_scores(runs, list(inputs["scores"]), spec.get("replicates")) if "scores" in inputs else {}
    return ItemData(spec, list(runs), scores, published, list(inputs.get("histories", [])),
                    list(inputs.get("predictions", [])), measured)


def _dataset_statistics(data: ItemData) -> Table:
    summaries = {d: history_summary(p) for d, p in zip(data.spec["datasets"], data.histories, strict=True)}
    return table_datasets(data.spec, summaries)


def _history_drawing(data: ItemData) -> Figure:
    labels = [data.spec["labels"][f"{m}/{v}"] for _, m, v in data.runs]
    return figure_history_drawing(data.spec, data.runs[0][0], data.histories[0], data.predictions, labels)


@dataclass(frozen=True)
class ReportItem:
    """One table or figure: the experiments it shows, what it reads and how it is made."""

    kind: str  # "table" (CSV, Markdown, LaTeX) or "figure" (PNG)
    shows: tuple[str, ...]  # config experiments it prints (their settings make its spec)
    build: Callable[[ItemData], Table | Figure]  # the table or figure from its inputs, once read
    inputs: str = "scores"  # one of INPUT_KINDS
    published: str | None = None  # also reads these published rows (a key of config `published:`)
    # also reads the upstream methods' measured rows (a key of config `published:` too: a committed
    # file of the workflow, not an output of this run)
    measured: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in ("table", "figure"):
            raise ValueError(f"a report item is a table or a figure, not {self.kind!r}")
        if self.inputs not in INPUT_KINDS:
            raise ValueError(f"unknown report input kind {self.inputs!r} (one of {', '.join(INPUT_KINDS)})")


REPORT_ITEMS = {
    "datasets": ReportItem("table", ("datasets",), _dataset_statistics, inputs="histories"),
    # the published rows decide whether the ablation's gate applies (same datasets)
    "ablation": ReportItem("table", ("ablation",), lambda d: table_ablation(d.spec, d.scores, d.published),
                           published="hermes_table2"),
    "canonical_quality": ReportItem("table", ("canonical",),
                                    lambda d: table_canonical_quality(d.spec, d.scores, d.published, d.measured),
                                    published="hermes_table2", measured="upstream_measured"),
    "unobserved_quality": ReportItem("table", ("canonical",), lambda d: table_unobserved_quality(d.spec, d.scores)),
    # the paper's own numbers (data/published/battus_paper_tables.csv) beside this run's
    "paper_comparison": ReportItem("table", ("canonical", "rate_grid"),
                                   lambda d: table_paper_comparison(d.spec, d.scores, d.published),
                                   published="battus_paper_tables"),
    "ditto_protocol": ReportItem("table", ("ditto_protocol",),
                                 lambda d: table_ditto_protocol(d.spec, d.scores, d.published, d.measured),
                                 published="ditto_kdd23", measured="upstream_measured"),
    # each method under test against each other, dataset by dataset, ties within the stated uncertainty
    "ditto_win_loss": ReportItem("table", ("ditto_protocol",),
                                 lambda d: table_ditto_win_loss(d.spec, d.scores, d.published),
                                 published="ditto_kdd23"),
    "calibration": ReportItem("table", ("calibration",), lambda d: table_calibration(d.spec, d.scores)),
    "feasibility_sensitivity": ReportItem("table", ("canonical", "rate_grid"),
                                          lambda d: table_feasibility_sensitivity(d.spec, d.scores)),
    "tau_sensitivity": ReportItem("table", ("tau",), lambda d: table_tau_sensitivity(d.spec, d.scores)),
    "rate_robustness": ReportItem("table", ("rate_robustness",), lambda d: table_rate_robustness(d.spec, d.scores)),
    "large_results": ReportItem("table", ("large",), lambda d: table_large_results(d.spec, d.scores)),
    "tau_curves": ReportItem("figure", ("tau",), lambda d: figure_tau_curves(d.spec, d.scores)),
    "rate_grid_heatmaps": ReportItem("figure", ("rate_grid",), lambda d: figure_rate_grid(d.spec, d.scores)),
    "canonical_bars": ReportItem("figure", ("canonical",),
                                 lambda d: figure_canonical_bars(d.spec, d.scores, d.published),
                                 published="hermes_table2"),
    "cv_vs_f1": ReportItem("figure", ("canonical",), lambda d: figure_cv_vs_f1(d.spec, d.scores, d.published),
                           published="hermes_table2"),
    "quality_heatmap": ReportItem("figure", ("canonical",),
                                  lambda d: figure_quality_heatmap(d.spec, d.scores, d.published),
                                  published="hermes_table2"),
    "win_loss": ReportItem("figure", ("canonical",), lambda d: figure_win_loss(d.spec, d.scores, d.published),
                           published="hermes_table2"),
    "timing": ReportItem("figure", ("canonical", "large"), lambda d: figure_timing(d.spec, d.scores, d.runs)),
    "time_vs_size": ReportItem("figure", ("canonical", "large"),
                               lambda d: figure_time_vs_size(d.spec, d.scores, d.runs)),
    # beside the paper's B200 rows (data/published/battus_large_b200.csv); made only with large graphs
    "large_timing": ReportItem("figure", ("large",), lambda d: figure_large_timing(d.spec, d.scores, d.runs)),
    "reliability": ReportItem("figure", ("calibration",), lambda d: figure_reliability(d.spec, d.scores)),
    "history_drawing": ReportItem("figure", ("canonical",), _history_drawing, inputs="history+predictions"),
}


def _item(name: str, kind: str | None = None) -> ReportItem:
    item = REPORT_ITEMS.get(name)
    if item is None or (kind is not None and item.kind != kind):
        raise ValueError(f"unknown {kind or 'report item'} {name!r}")
    return item


# ---------------------------------------------------------------------------
# What an item reads from a workflow plan (battus.suite.experiments.Plan)


def report_runs(name: str, plan: Plan) -> list[Run] | None:
    """The (dataset, method, variant) runs a table or figure reads, once each; None: not made by this plan."""
    item = _item(name)
    if item.inputs == "histories":
        return [] if all(e in plan.experiments for e in item.shows) else None
    if item.inputs == "history+predictions":
        drawn = [plan.experiments.get(e) or {} for e in item.shows]
        drawn = [experiment for experiment in drawn if experiment.get("drawing")]
        if not drawn:
            return None
        # the methods under test: the truth is drawn anyway, the other yardsticks would crowd it
        return list(dict.fromkeys((experiment["drawing"], m, v) for experiment in drawn
                                  for m, v in experiment["methods"] if not plan.is_yardstick(m)))
    runs = [run for experiment in item.shows for run in plan.runs(experiment)]
    return list(dict.fromkeys(runs)) or None


def report_datasets(name: str, plan: Plan) -> list[str]:
    """The datasets a table or figure shows, in order: those its experiments list where it reads
    their histories, else those its runs are on (a dataset repeated over seeds under its own name)."""
    item = _item(name)
    if item.inputs == "histories":
        return list(dict.fromkeys(d for e in item.shows for d in plan.experiments[e]["datasets"]))
    return list(dict.fromkeys(plan.base_dataset(d) for d, _, _ in report_runs(name, plan) or []))


def report_reads(name: str, plan: Plan) -> dict[str, list[tuple[str, ...]]]:
    """The files a table or figure reads, besides published rows, as the wildcards of the workflow's
    files: ``scores`` and ``predictions`` (dataset, method, variant) of runs, ``histories`` (dataset,)."""
    item = _item(name)
    runs = report_runs(name, plan) or []
    if item.inputs == "histories":
        return {"histories": [(d,) for d in report_datasets(name, plan)]}
    if item.inputs == "history+predictions":
        return {"histories": [(d,) for d in dict.fromkeys(d for d, _, _ in runs)], "predictions": runs}
    return {"scores": runs}


def report_made(plan: Plan, kind: str) -> list[str]:
    """The tables (or figures) this plan makes, in the paper's order."""
    return [n for n, item in REPORT_ITEMS.items() if item.kind == kind and report_runs(n, plan) is not None]


def report_spec(name: str, plan: Plan) -> dict:
    """What a table or figure shows: only its own experiments' settings, labels and datasets,
    so that editing one experiment reruns only its own tables."""
    experiments = {k: plan.experiments[k] for k in _item(name).shows if k in plan.experiments}
    runs = report_runs(name, plan) or []
    # datasets simulated at another seed -> the dataset they repeat (their runs are merged)
    replicates = {d: plan.base_dataset(d) for d, _, _ in runs if plan.base_dataset(d) != d}
    spec = {
        "name": plan.name,
        "experiments": experiments,
        "datasets": {d: plan.dataset_info(d) for d in report_datasets(name, plan)},
        "labels": {f"{m}/{v}": plan.run_label(m, v) for _, m, v in runs},
        "controls": sorted({f"{m}/{v}" for _, m, v in runs if plan.is_control(m)}),
    }
    if replicates:
        spec["replicates"] = replicates
    if "ditto_protocol" in experiments:
        methods = experiments["ditto_protocol"]["methods"]
        spec["ditto_variants"] = {f"{m}/{v}": plan.ditto_variant(v) for m, v in methods}
    if "tau" in experiments:
        tau = experiments["tau"]
        spec["tau_variants"] = {f"{x:.2f}": plan.tau_variant(tau["method"], x) for x in tau["taus"]}
    if "rate_grid" in experiments:
        grid = experiments["rate_grid"]
        spec["rate_variants"] = [[bi, br, plan.rates_variant(grid["method"], bi, br)]
                                 for bi in grid["beta_i"] for br in grid["beta_r"]]
    if "rate_robustness" in experiments:
        spec["rate_runs"] = [list(r) for r in plan.rate_robustness]
    return spec


# ---------------------------------------------------------------------------
# Making an item


def _with_seeds_note(table: Table) -> Table:
    note = seeds_note(table)
    if note:
        table.note = f"{table.note} {note}".strip()
    return table


def build_table(name: str, spec: dict, scores: dict, histories: list[str | Path] | None = None,
                published: pd.DataFrame | None = None, measured: pd.DataFrame | None = None) -> Table:
    """One of the paper's tables from its spec, its scores (as :func:`load_scores` gives them) and,
    where it reads them, its history files (in the spec's dataset order), published rows and the
    upstream methods' measured rows; a note says what ``±`` means."""
    item = _item(name, "table")
    return _with_seeds_note(item.build(ItemData(spec, [], scores, published, list(histories or []),
                                                measured=measured)))


def render_figure(name: str, spec: dict, runs: list[Run], inputs: dict) -> Figure:
    """One of the paper's figures from its input files (as :func:`make` reads them), not saved."""
    return _item(name, "figure").build(read_inputs(spec, runs, inputs))


def make(name: str, spec: dict, runs: list[Run], inputs: dict, outputs: list) -> str:
    """Make one table (outputs: CSV, Markdown, LaTeX) or figure (outputs: PNG) from its input files.

    ``inputs``: ``scores`` (one file per run, in ``runs`` order), ``histories`` (one per dataset of
    the spec), ``predictions`` (one per run), ``published`` (the published rows), ``measured`` (the
    upstream methods' measured rows), each present only
    where the item reads it (:func:`report_reads`). Returns a one-line summary for the log.
    """
    item = _item(name)
    made = item.build(read_inputs(spec, runs, inputs))
    if item.kind == "figure":
        save_figure(made, outputs[0])
        return f"wrote {outputs[0]}"
    table = _with_seeds_note(made)
    write_table(table, *outputs)
    return f"wrote {outputs[0]} ({len(table.panels)} panels, {len(table.tidy)} CSV rows)"
