"""Every figure of the default, CI, tiny and GPU configurations, rendered from made-up scores and
checked: nothing clipped, legends off the data, labels from the config's ``label`` (en dash, no
LaTeX ``--``), titles in words, one colour per method across configurations, quality axes zoomed
with every control's value still shown, controls never timed, a plug-in's time marked
self-reported, ticks at the values of few-point lines, legible heat-map numbers, wins and losses
with the tables' tie rule, and the paper's large-graph rows beside the run's."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import yaml

from battus.suite import report

matplotlib = pytest.importorskip("matplotlib")
pytest.importorskip("snakemake")

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ROOT / "data/published/hermes_table2.csv"
BUILTIN = ("battus", "battus-z", "truth", "random", "observed-copy", "graph-distance")
# tiny adds the controls and a plug-in method to the canonical figures
# gpu: large graphs only (the large-graph figures without a canonical experiment's quality ones)
CONFIGS = {"default": ROOT / "config/config.yaml", "ci": ROOT / "config/test/ci.yaml",
           "tiny": ROOT / "config/test/tiny.yaml", "gpu": ROOT / "config/test/gpu.yaml"}


def _plan(config: Path):
    from snakemake.utils import validate

    from battus.suite.experiments import Plan

    cfg = yaml.safe_load(config.read_text())
    validate(cfg, str(ROOT / "config/schemas/config.schema.yaml"))  # fills in the defaults
    return Plan(cfg)


def _score(key: str) -> dict:
    """A plausible score record, different per run but the same on every call."""
    rng = np.random.default_rng(zlib.crc32(key.encode()))
    events = int(rng.integers(200, 2000))
    dataset, method, _ = key.split("|")
    # the controls as they score: the truth perfect, random far below the methods
    f1, nrmse = {"truth": (1.0, 0.0), "random": (float(rng.uniform(0.3, 0.4)), float(rng.uniform(0.45, 0.6)))}.get(
        method, (float(rng.uniform(0.7, 0.92)), float(rng.uniform(0.08, 0.3))))
    # one size per graph (both models of a dataset share it), a plug-in's time its own
    n = int(np.random.default_rng(zlib.crc32(dataset.rsplit("-", 1)[0].encode())).integers(80, 10**5))
    return {
        "hermes": {"f1": f1, "nrmse": nrmse},
        "unobserved": {"f1": float(rng.uniform(0.7, 0.9)), "nrmse": float(rng.uniform(0.1, 0.3))},
        # synthetic truths have no violations: the truth lines then sit at 0, at the axis' edge
        "causal": {"prediction": {"violations": int(0.1 * events), "events": events, "rate": 0.1},
                   "truth": {"violations": 0, "events": events, "rate": 0.0}},
        "algorithm_seconds": float(10 ** rng.uniform(-2, 1)), "model": "sir" if dataset.endswith("sir") else "si",
        "n": n, "backend": "cpu" if method in BUILTIN else "external", "device": "test",
        "calibration": _calibration(rng),
    }


def _calibration(rng) -> dict:
    count = rng.integers(0, 500, 10)
    predicted = (np.arange(10) + rng.uniform(0.2, 0.8, 10)) / 10
    return {"frames": "unobserved", "brier": float(rng.uniform(0.1, 0.3)), "log_loss": float(rng.uniform(0.2, 0.5)),
            "ece": float(rng.uniform(0, 0.05)), "overconfidence": float(rng.uniform(-0.02, 0.04)),
            "reliability": {"bins": 10, "count": count.tolist(), "mean_predicted": predicted.tolist(),
                            "observed_frequency": np.clip(predicted + rng.normal(0, 0.05, 10), 0, 1).tolist()}}


def _history_inputs(tmp_path: Path, runs: list) -> dict:
    """A small SIR history and one prediction file per run (the truth with a few states changed)."""
    from battus.generators import barabasi_albert
    from battus.io import write_history, write_prediction
    from battus.problem import Problem, Reconstruction, observe, schedule_times
    from battus.simulate import simulate

    graph = barabasi_albert(150, 2, seed=1)
    truth = simulate(graph, "sir", 6, 5, 0.2, 0.1, seed=3)
    problem = Problem(graph=graph, model="sir", T=6, n0=5, observations=observe(truth, schedule_times(6)),
                      truth=truth, name=runs[0][0])
    write_history(tmp_path / "history.h5", problem)
    predictions = []
    for k, (_, m, v) in enumerate(runs):
        states = truth.copy()
        states[1:, k::7] = truth[:-1, k::7]  # every seventh vertex one frame late
        never = truth.shape[0]
        t_inf = np.where((states != 0).any(axis=0), np.argmax(states != 0, axis=0), never)
        t_rec = np.where((states == 2).any(axis=0), np.argmax(states == 2, axis=0), never)
        recon = Reconstruction(states=states, t_inf=t_inf, t_rec=t_rec, beta_i=0.1, beta_r=0.1,
                               params={"method": m}, backend="cpu", device="test", algorithm_seconds=0.01)
        predictions.append(tmp_path / f"{m}-{v}.h5")
        write_prediction(predictions[-1], recon, problem, tmp_path / "history.h5")
    return {"histories": [tmp_path / "history.h5"], "predictions": predictions}


def _inputs(name: str, runs: list, tmp_path: Path) -> dict:
    if report.REPORT_ITEMS[name].inputs == "history+predictions":
        return _history_inputs(tmp_path, runs)
    paths = []
    for i, (d, m, v) in enumerate(runs):
        paths.append(tmp_path / f"score{i}.json")
        paths[-1].write_text(json.dumps(_score(f"{d}|{m}|{v}")))
    inputs = {"scores": paths}
    if report.REPORT_ITEMS[name].published:
        inputs["published"] = PUBLISHED
    return inputs


def _expected_labels(name: str, spec: dict) -> set[str]:
    """What the figure must print, as the config's ``label`` converted by label_text."""
    # pooled over datasets (or placed by size, or counted): these name no dataset
    pooled = ("cv_vs_f1", "reliability", "time_vs_size", "win_loss", "large_timing")
    datasets = set() if name in pooled else {info["label"] for info in spec["datasets"].values()}
    if name == "large_timing":  # placed by graph: the graph's name, without the model
        datasets = {info["label"].rsplit("--", 1)[0] for info in spec["datasets"].values()}
    methods = set()
    if name in ("canonical_bars", "cv_vs_f1", "history_drawing", "reliability", "quality_heatmap"):
        methods = set(spec["labels"].values())
    if name in ("timing", "time_vs_size", "large_timing", "win_loss"):  # controls are not timed or ranked
        methods = {label for key, label in spec["labels"].items() if key not in spec["controls"]}
    return {report.label_text(x) for x in datasets | methods}


def _rendered(config: str, tmp_path_factory) -> dict:
    plan = _plan(CONFIGS[config])
    out = {}
    for name in report.report_made(plan, "figure"):
        runs = report.report_runs(name, plan)
        spec = report.report_spec(name, plan)
        fig = report.render_figure(name, spec, runs, _inputs(name, runs, tmp_path_factory.mktemp(name)))
        fig.canvas.draw()
        out[name] = (fig, spec)
    return out


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    rendered = {config: _rendered(config, tmp_path_factory) for config in CONFIGS}
    yield rendered
    import matplotlib.pyplot as plt

    plt.close("all")


def _texts(fig) -> list[str]:
    from matplotlib.text import Text

    return [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _legends(fig) -> list:
    return list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_figure_fits_its_canvas(figures, config):
    canonical = {"canonical_bars", "cv_vs_f1", "quality_heatmap", "win_loss", "history_drawing", "reliability"}
    made = {"timing", "time_vs_size"} | ({"large_timing"} if config != "ci" else set())
    made |= canonical if config != "gpu" else set()
    made |= {"tau_curves", "rate_grid_heatmaps"} if config in ("default", "tiny") else set()
    assert set(figures[config]) == made
    for name, (fig, _) in figures[config].items():
        renderer = fig.canvas.get_renderer()
        canvas = fig.bbox
        tight = fig.get_tightbbox(renderer).transformed(fig.dpi_scale_trans)  # inches -> pixels
        assert tight.x0 >= canvas.x0 - 1 and tight.y0 >= canvas.y0 - 1, (config, name, tight, canvas)
        assert tight.x1 <= canvas.x1 + 1 and tight.y1 <= canvas.y1 + 1, (config, name, tight, canvas)
        for legend in _legends(fig):
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                assert not box.overlaps(ax.bbox), f"{config}/{name}: legend covers an axes"


@pytest.mark.parametrize("config", list(CONFIGS))
def test_figure_labels_come_from_label(figures, config):
    for name, (fig, spec) in figures[config].items():
        texts = _texts(fig)
        assert not [t for t in texts if "--" in t], f"{config}/{name}: LaTeX dashes printed"
        for label in _expected_labels(name, spec):
            assert any(label in t for t in texts), f"{config}/{name}: {label!r} not shown"
    # the CI labels differ from their keys: a figure titled with the key fails above
    _, spec = figures["ci"]["history_drawing"]
    assert [info["label"] for info in spec["datasets"].values()] == ["BrFarmers--SI"]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_titles_are_in_words(figures, config):
    """No config id (``battus-z``, ``default``, a variant's id) in a title."""
    for name, (fig, _) in figures[config].items():
        titles = [t.get_text() for t in [fig._suptitle] if t is not None]
        titles += [ax.get_title() for ax in fig.axes]
        for title in titles:
            assert not any(word in title for word in ("battus-z", "battus ", "default", "rates-", "tau-")), \
                f"{config}/{name}: {title!r}"


def test_text_is_large_enough_and_end_labels_apart(figures):
    from matplotlib.text import Annotation, Text

    for config in CONFIGS:
        for name, (fig, _) in figures[config].items():
            small = [t.get_text() for t in fig.findobj(Text)
                     if t.get_visible() and t.get_text().strip() and t.get_fontsize() < 7]
            assert not small, f"{config}/{name}: text under 7 pt: {small[:3]}"
    fig, _ = figures["default"]["tau_curves"]
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [a.get_window_extent(renderer) for a in ax.texts if isinstance(a, Annotation)]
        assert len(boxes) == 4  # one per dataset of the sweep
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def _legend_colors(fig) -> dict[str, tuple]:
    from matplotlib.colors import to_rgba

    colors = {}
    for legend in _legends(fig):
        for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
            face = handle.get_facecolor() if hasattr(handle, "get_facecolor") else handle.get_color()
            face = np.atleast_2d(face)[0] if not isinstance(face, str) else face
            colors[text.get_text()] = to_rgba(face)
    return colors


def test_one_colour_per_method_in_every_configuration(figures):
    seen: dict[str, set] = {}
    for config in CONFIGS:
        for name in ("canonical_bars", "timing"):
            if name not in figures[config]:
                continue
            colors = _legend_colors(figures[config][name][0])
            assert len(set(colors.values())) == len(colors), f"{config}/{name}: two methods share a colour"
            for label, color in colors.items():
                seen.setdefault(label.removesuffix(": self-reported time"), set()).add(color)
    # the CI config lists Battus-Z first, the default Battus first: the colours must not follow the order
    assert {"Battus", "Battus-Z", "Truth (positive control)"} <= set(seen)
    assert all(len(colors) == 1 for colors in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and differ between methods


def test_quality_axes_zoom_and_show_every_control(figures):
    """F1 and NRMSE axes zoom to the methods and say so; a control off the zoom (the truth's F1 of
    1 and NRMSE of 0, random's) is drawn at the edge with its value printed, never dropped."""
    for config in ("default", "ci", "tiny"):
        fig, spec = figures[config]["canonical_bars"]
        f1, nrmse = fig.axes[:2]
        assert f1.get_ylim()[0] > 0.5 and f1.get_ylim()[1] < 1, (config, f1.get_ylim())  # zoomed
        assert "zoomed" in f1.get_ylabel() and "zoomed" in nrmse.get_ylabel()
        datasets = len(fig.axes[1].get_xticklabels())
        for ax, truth in ((f1, "\u21911.00"), (nrmse, "\u21930")):
            printed = [t.get_text() for t in ax.texts]
            assert printed.count(truth) == datasets, (config, printed)  # the truth, once per dataset
            assert sum(t.startswith(("\u2191.", "\u2193.")) for t in printed) == datasets  # random


def test_controls_are_not_timed_and_plugin_time_is_self_reported(figures):
    for config in CONFIGS:
        for name in ("timing", "time_vs_size", "large_timing"):
            if name not in figures[config]:
                continue
            fig, spec = figures[config][name]
            texts = " ".join(_texts(fig))
            assert "control" not in texts, f"{config}/{name}: a control is timed"
            assert "external" not in texts  # a plug-in's backend is not a measured one
            plugins = [label for key, label in spec["labels"].items()
                       if key.split("/")[0] not in BUILTIN and key not in spec["controls"]]
            for label in plugins:
                assert f"{report.label_text(label)}: self-reported time" in texts, f"{config}/{name}"
            for legend in _legends(fig):  # self-reported times are hollow, measured ones filled
                for handle, text in zip(legend.legend_handles, legend.get_texts(), strict=True):
                    if hasattr(handle, "get_markerfacecolor") and handle.get_marker() not in ("D", "s", "None"):
                        hollow = handle.get_markerfacecolor() in ("white", "none")
                        assert hollow == ("self-reported" in text.get_text()), (config, name, text.get_text())


def test_few_point_lines_tick_at_their_values(figures):
    for config in ("default", "tiny"):
        fig, spec = figures[config]["tau_curves"]
        taus = sorted(float(t) for t in spec["tau_variants"])
        for ax in fig.axes:
            assert np.allclose(ax.get_xticks(), taus), (config, ax.get_xticks())
            assert [t.get_text() for t in ax.get_xticklabels()] == [f"{t:.2f}" for t in taus]


def test_heat_map_marks_controls_and_scales_to_the_methods(figures):
    for config in ("default", "ci", "tiny"):
        fig, spec = figures[config]["quality_heatmap"]
        panels = [ax for ax in fig.axes if ax.images]
        assert len(panels) == 2
        for ax in panels:
            labels = [t.get_text() for t in ax.get_yticklabels()]
            controls = sorted(report.label_text(spec["labels"][k]) for k in spec["controls"])
            assert len(controls) == 2 and sorted(labels[-2:]) == controls  # below the methods, set off by a line
            assert all(t.get_style() == "italic" for t in ax.get_yticklabels()[-2:])
            image = ax.images[0]
            assert image.get_array().mask[-2:].all()  # grey cells: off the colour scale
            assert 0 < image.norm.vmin and image.norm.vmax < 1  # the scale spans the methods
            assert len(ax.texts) == image.get_array().size  # every cell prints its value


def test_win_loss_ties_follow_the_tables():
    """Four decimals for single runs, mean +- sd overlap for means over seeds."""
    from battus.suite.report.figures_quality import _outcome

    assert _outcome(0.81231, 0.81234, higher=True) == 0  # equal to four decimals
    assert _outcome(0.8124, 0.8123, higher=True) == 1
    assert _outcome(0.8124, 0.8123, higher=False) == -1
    a, b = report.SeedStat([0.80, 0.82, 0.84]), report.SeedStat([0.83, 0.85, 0.87])
    assert _outcome(a, b, higher=True) == 0  # 0.82 +- 0.02 against 0.85 +- 0.02: overlap
    c = report.SeedStat([0.90, 0.91, 0.92])
    assert _outcome(c, a, higher=True) == 1 and _outcome(a, c, higher=True) == -1


def test_win_loss_counts_every_dataset_once(figures):
    from battus.suite.report.figures_quality import win_loss_counts

    plan = _plan(CONFIGS["tiny"])
    runs = report.report_runs("win_loss", plan)
    spec = report.report_spec("win_loss", plan)
    data = report.read_inputs(spec, runs, _inputs("win_loss", runs, Path(__import__("tempfile").mkdtemp())))
    counts = win_loss_counts(spec, data.scores, data.published)
    n = len(spec["experiments"]["canonical"]["si"] + spec["experiments"]["canonical"]["sir"])
    assert ((counts["wins"] + counts["ties"] + counts["losses"]) == n).all()
    assert set(counts["method"]) == {"Battus", "Battus-Z"}  # the Battus methods only
    assert not counts["other"].str.contains("control").any()
    # each pair of Battus methods is one method's wins and the other's losses
    ab = counts[(counts["method"] == "Battus") & (counts["other"] == "Battus-Z")].set_index("metric")
    ba = counts[(counts["method"] == "Battus-Z") & (counts["other"] == "Battus")].set_index("metric")
    assert (ab["wins"] == ba["losses"]).all() and (ab["ties"] == ba["ties"]).all()


def test_large_graph_table_transcribed_and_shown_beside_the_run(figures):
    from battus.suite.report.figures_time import large_b200_path, read_large_b200

    assert large_b200_path().exists()
    header = large_b200_path().read_text().splitlines()[0]
    assert "tab:large-results" in large_b200_path().read_text().split("method,")[0] and header.startswith("#")
    rows = read_large_b200()
    assert len(rows) == 16 and set(rows["method"]) == {"Battus", "Battus-Z"}
    assert set(rows["graph"]) == {"Web-Stanford", "Web-Google", "Orkut", "LiveJournal"}
    # the table's own mean rows: geometric mean of the times (436/85 ms SI, 1621/80 ms SIR)
    geo = rows.groupby(["method", "model"])["time_ms"].apply(lambda s: np.exp(np.log(s).mean()))
    assert np.allclose(geo.to_numpy(), [436, 1621, 85, 80], rtol=0.01)  # from the rounded times
    for config in ("default", "tiny", "gpu"):
        fig, spec = figures[config]["large_timing"]
        texts = " ".join(_texts(fig))
        assert "NVIDIA B200" in texts and "Web-Stanford\n(paper)" in texts and "LiveJournal\n(paper)" in texts
        for ax in fig.axes:
            assert ax.get_yscale() == "log"
            sizes = [int(t.get_text().rsplit("n = ", 1)[1].split()[0].replace(",", "")) for t in ax.get_xticklabels()]
            assert sizes == sorted(sizes)  # graphs ordered by vertices
    # the paper's own graphs: this run's dots and the paper's diamonds in one column per graph
    fig, spec = _render_one("paper", "large_timing")
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert sorted(t.split("\n")[0] for t in ticks) == ["LiveJournal", "Orkut", "Web-Google", "Web-Stanford"]
    assert all(t.split("\n")[1] == "(this run and paper)" for t in ticks)
    # where the run has no large graphs (CI) the figure is not made
    assert "large_timing" not in figures["ci"]


def _render_one(config: str, name: str):
    """One figure of a configuration not rendered in full (the paper's: its graphs at their sizes)."""
    import tempfile

    plan = _plan(ROOT / f"config/{config}.yaml")
    runs = report.report_runs(name, plan)
    spec = report.report_spec(name, plan)
    fig = report.render_figure(name, spec, runs, _inputs(name, runs, Path(tempfile.mkdtemp())))
    fig.canvas.draw()
    return fig, spec


def test_time_against_size_is_log_log(figures):
    for config in CONFIGS:
        fig, _ = figures[config]["time_vs_size"]
        ax = fig.axes[0]
        assert ax.get_xscale() == ax.get_yscale() == "log"
        assert "vertices" in ax.get_xlabel()


def _contrast(a, b) -> float:
    def luminance(rgba):
        c = np.asarray(rgba[:3], float)
        c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_heat_map_numbers_are_legible(figures):
    from matplotlib.colors import to_rgba

    fig, spec = figures["default"]["rate_grid_heatmaps"]
    grid_spec = spec["experiments"]["rate_grid"]
    checked = 0
    for ax in fig.axes:
        if not ax.images or not ax.texts:
            continue
        image = ax.images[0]
        grid = image.get_array()
        for text in ax.texts:
            col, row = (int(round(v)) for v in text.get_position())
            cell = image.cmap(image.norm(grid[row, col]))
            assert _contrast(to_rgba(text.get_color()), cell) >= 4.5, (text.get_text(), text.get_color(), cell)
            checked += 1
    # every cell of every panel: datasets x (F1, NRMSE) x the rate grid
    assert checked == len(grid_spec["datasets"]) * 2 * len(grid_spec["beta_i"]) * len(grid_spec["beta_r"])


def test_label_text_converts_latex_dashes_once():
    assert report.label_text("BA--SI") == "BA\u2013SI"
    assert report.label_text("a---b") == "a\u2014b"
    assert report.label_text("BA\u2013SI", latex=True) == "BA--SI"
    assert report.label_text("Battus-Z") == "Battus-Z"
    assert report.method_color("battus-z/default") == report.method_color("battus-z/default") != \
        report.method_color("battus/default")
