"""The DITTO plug-in wrapper (examples/methods/ditto): its torch-free parts always, its shims where
PyTorch is installed (CI has no PyTorch: the shim tests skip there)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "examples/methods/ditto/run_ditto.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_ditto = _load("run_ditto", WRAPPER)


def _history(path: Path, times: list[int], T: int = 4) -> None:
    # a directed 4-cycle plus one undirected edge 0-2, as in-neighbour CSR (docs/format.md)
    arcs = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (2, 0)]  # (source, target)
    n = 4
    indptr = np.zeros(n + 1, dtype=np.int64)
    for _, t in arcs:
        indptr[t + 1] += 1
    indptr = np.cumsum(indptr)
    indices = [s for t in range(n) for s, tt in sorted(arcs) if tt == t]
    with h5py.File(path, "w") as f:
        f.attrs.update(format="battus-history", format_version=1, model="sir", T=T, n0=1)
        f["graph/indptr"] = indptr
        f["graph/indices"] = np.array(indices, dtype=np.int32)
        f["graph"].attrs["directed"] = True
        f["observations/times"] = np.array(times)
        f["observations/states"] = np.array([[1, 1, 2, 0]] * len(times), dtype=np.uint8)


def test_history_becomes_dittos_arcs_and_final_frame(tmp_path):
    _history(tmp_path / "h.h5", [2, 4])
    h = run_ditto.read_history(str(tmp_path / "h.h5"))
    assert sorted(zip(h["sources"].tolist(), h["targets"].tolist(), strict=True)) == sorted(
        [(0, 1), (1, 2), (2, 3), (3, 0), (0, 2), (2, 0)])
    assert h["final"].tolist() == [1, 1, 2, 0] and (h["T"], h["n0"], h["n"]) == (4, 1, 4)


def test_history_without_the_final_frame_is_refused(tmp_path):
    _history(tmp_path / "h.h5", [2])
    with pytest.raises(SystemExit, match="final frame T=4"):
        run_ditto.read_history(str(tmp_path / "h.h5"))


def test_presets_are_dittos_scripts():
    common = run_ditto.preset_args("ba-si", 1000)
    assert (common["q_steps"], common["q_samples"], common["t_samples"], common["t_steps"]) == (500, 10, 100, 10)
    assert run_ditto.preset_args("auto", 1000) == common
    assert run_ditto.preset_args("auto", 11_461) == run_ditto.preset_args("oregon2-si", 0)
    assert run_ditto.preset_args("auto", 11_461)["q_samples"] == 2
    covid = run_ditto.preset_args("covid-sir", 0)
    assert (covid["b_pI0"], covid["q_steps"], covid["t_samples"], covid["t_steps"]) == (0.001, 250, 1000, 100)
    with pytest.raises(SystemExit, match="--preset"):
        run_ditto.preset_args("nope", 10)


@pytest.fixture()
def shim():
    torch = pytest.importorskip("torch")
    sys.path.insert(0, str(WRAPPER.parent / "shims"))
    try:
        module = _load("torch_scatter_shim", WRAPPER.parent / "shims/torch_scatter/__init__.py")
    finally:
        sys.path.pop(0)
    return torch, module


@pytest.mark.parametrize("name, reduce, empty", [("scatter_sum", np.sum, 0), ("scatter_mean", np.mean, 0),
                                                 ("scatter_mul", np.prod, 1), ("scatter_max", np.max, 0),
                                                 ("scatter_min", np.min, 0)])
def test_torch_scatter_shim_matches_a_loop(shim, name, reduce, empty):
    torch, module = shim
    rng = np.random.default_rng(0)
    src = rng.normal(size=(9, 3))
    index = np.array([0, 2, 2, 4, 0, 4, 4, 2, 0])  # 1 and 3 receive nothing
    out = getattr(module, name)(src=torch.from_numpy(src), index=torch.from_numpy(index), dim=0, dim_size=5)
    out = (out[0] if isinstance(out, tuple) else out).numpy()
    for k in range(5):
        expected = reduce(src[index == k], axis=0) if (index == k).any() else np.full(3, empty)
        np.testing.assert_allclose(out[k], expected, rtol=1e-12)


def test_segment_min_csr_shim_on_integers(shim):
    torch, module = shim
    src = torch.tensor([5, 3, 9, 7, 7, 1, 4], dtype=torch.long)
    indptr = torch.tensor([0, 2, 3, 7])
    assert module.segment_min_csr(src=src, indptr=indptr)[0].tolist() == [3, 9, 1]
