"""Every figure of the default, CI and tiny configurations, rendered from made-up scores and checked:
nothing clipped, legends off the data, labels from the config's ``label`` (en dash, no LaTeX
``--``), one colour per method across configurations, bars from 0, legible heat-map numbers."""

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
# tiny adds the controls and a plug-in method to the canonical figures
CONFIGS = {"default": ROOT / "config/config.yaml", "ci": ROOT / "config/test/ci.yaml",
           "tiny": ROOT / "config/test/tiny.yaml"}


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
    return {
        "hermes": {"f1": float(rng.uniform(0.7, 0.92)), "nrmse": float(rng.uniform(0.08, 0.3))},
        "unobserved": {"f1": float(rng.uniform(0.7, 0.9)), "nrmse": float(rng.uniform(0.1, 0.3))},
        # synthetic truths have no violations: the truth lines then sit at 0, at the axis' edge
        "causal": {"prediction": {"violations": int(0.1 * events), "events": events, "rate": 0.1},
                   "truth": {"violations": 0, "events": events, "rate": 0.0}},
        "algorithm_seconds": float(10 ** rng.uniform(-2, 1)), "model": "sir", "n": int(rng.integers(80, 10**5)),
        "backend": "cpu", "device": "test",
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
    # pooled over datasets: cv_vs_f1 and the reliability diagram name no dataset
    datasets = set() if name in ("cv_vs_f1", "reliability") else {info["label"] for info in spec["datasets"].values()}
    methods = set()
    if name in ("canonical_bars", "cv_vs_f1", "timing", "history_drawing", "reliability"):
        methods = set(spec["labels"].values())
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
    made = {"canonical_bars", "cv_vs_f1", "timing", "history_drawing"}
    assert set(figures[config]) == (made | ({"tau_curves", "rate_grid_heatmaps"} if config != "ci" else set())
                                    | {"reliability"})
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
            colors = _legend_colors(figures[config][name][0])
            assert len(set(colors.values())) == len(colors), f"{config}/{name}: two methods share a colour"
            for label, color in colors.items():
                seen.setdefault(label, set()).add(color)
    # the CI config lists Battus-Z first, the default Battus first: the colours must not follow the order
    assert {"Battus", "Battus-Z", "Truth (positive control)"} <= set(seen)
    assert all(len(colors) == 1 for colors in seen.values()), seen
    assert len({next(iter(c)) for c in seen.values()}) == len(seen)  # and differ between methods


def test_bars_start_at_zero_for_f1_and_nrmse(figures):
    for config in CONFIGS:
        fig, _ = figures[config]["canonical_bars"]
        f1, nrmse = fig.axes[:2]
        assert f1.get_ylim()[0] == 0 and nrmse.get_ylim()[0] == 0, config
        assert f1.get_ylim()[1] == 1


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
