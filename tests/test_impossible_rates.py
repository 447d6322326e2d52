"""Rates under which the observations are impossible: `battus reconstruct` refuses them in one line
naming the rates, whether or not it keeps the posteriors, decodes as it forms them (the fused
default), repairs causally or fits, and on the CUDA backend as on the CPU.

A normaliser of the forward-backward that is 0 leaves a vertex's posteriors NaN; the decoders then
return ``vertex_rules.UNDEFINED`` and ``decode.refuse_undefined`` refuses, instead of a history
decoded from NaN (which the fused path used to write with exit 0).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from battus.cli import main
from battus.graph import from_arcs
from battus.io import write_history
from battus.problem import Problem, observe
from battus.simulate import simulate

T = 8


def _problem(model: str) -> Problem:
    rng = np.random.default_rng(1)
    graph = from_arcs(rng.integers(0, 40, 160), rng.integers(0, 40, 160), directed=False, n=40)
    truth = simulate(graph, model, T, 3, 0.4, 0.3, seed=5)
    # every frame observed: each infection and recovery is seen as it happens
    return Problem(graph=graph, model=model, T=T, n0=3, observations=observe(truth, np.arange(T + 1)),
                   truth=truth, name=f"toy-{model}")


@pytest.fixture(scope="module")
def histories(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("histories")
    paths = {}
    for model in ("si", "sir"):
        problem = _problem(model)
        assert (problem.truth[1:] > problem.truth[:-1]).any(), "the toy history must change"
        if model == "sir":
            assert (problem.truth == 2).any() and (problem.truth == 1).any(), "needs recoveries and infections"
        paths[model] = folder / f"{model}.h5"
        write_history(paths[model], problem)
    return paths


IMPOSSIBLE = [
    ("si", ["--beta-i", "0"], "beta_i=0,"),  # an infection seen where none can happen
    ("sir", ["--beta-i", "0"], "beta_i=0,"),
    ("sir", ["--beta-r", "0"], "beta_r=0 "),  # a recovery seen where none can happen
    ("sir", ["--beta-r", "1"], "beta_r=1 "),  # a vertex seen I twice where each recovers at once
    ("sir", ["--beta-i", "1", "--beta-r", "1"], "beta_i=1,"),
    ("sir", ["--beta-i", "5e-324", "--beta-r", "5e-324"], "beta_i=4.94066e-324"),  # subnormal: all underflows
    ("si", ["--beta-i", "5e-324"], "beta_i=4.94066e-324"),
]
WAYS = {  # the fused decode (nothing kept), the posteriors kept, the MAP decoder, the causal repair
    "fused": [], "posteriors": ["--posteriors"], "map": ["--decoder", "map"], "causal": ["--causal"],
}


@pytest.mark.parametrize("way", list(WAYS))
@pytest.mark.parametrize("model, rates, needle", IMPOSSIBLE, ids=[" ".join([m, *r]) for m, r, _ in IMPOSSIBLE])
def test_impossible_rates_are_refused_in_one_line(tmp_path, capsys, histories, model, rates, needle, way):
    out = tmp_path / "pred.h5"
    code = main(["reconstruct", str(histories[model]), "--out", str(out), "--method", "battus-z",
                 "--backend", "cpu", "--quiet", *rates, *WAYS[way]])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("battus: error: --beta-i/--beta-r: rates: the observations have probability 0"), err
    assert needle in err, err
    assert not out.exists() and not list(tmp_path.glob(".pred.h5.*")), "nothing may be written"


def test_fit_bounds_that_leave_only_impossible_rates_are_refused(tmp_path, capsys, histories):
    out = tmp_path / "pred.h5"
    code = main(["reconstruct", str(histories["sir"]), "--out", str(out), "--method", "battus", "--backend", "cpu",
                 "--quiet", "--rate-lower", "0", "--rate-upper", "5e-324", "--grid-points", "2",
                 "--refine-rounds", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("battus: error: --rate-lower/--rate-upper: fit bounds:") and "(fitted)" in err, err
    assert not out.exists()


@pytest.mark.parametrize("way", list(WAYS))
def test_possible_rates_still_decode(tmp_path, capsys, histories, way):
    out = tmp_path / "pred.h5"
    code = main(["reconstruct", str(histories["sir"]), "--out", str(out), "--method", "battus-z",
                 "--backend", "cpu", "--quiet", *WAYS[way]])
    assert code == 0, capsys.readouterr().err
    assert out.is_file()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the simulator divides 0 by 0 in Python
def test_the_cuda_backend_refuses_the_same_rates():
    """Through the shared decode (no backend-name branching): the CUDA kernels compile the same
    decoders, so their hitting times carry UNDEFINED too (Numba's CUDA simulator without a GPU)."""
    from battus.backends import cuda_available
    from battus.errors import InputError
    from battus.pipeline import method_options, reconstruct

    if not cuda_available():
        pytest.skip("needs NUMBA_ENABLE_CUDASIM=1 or a CUDA device")
    from battus.backends.cuda import CUDABackend

    problem = _problem("sir")
    backend = CUDABackend()
    for keep in (False, True):
        with pytest.raises(InputError, match=r"probability 0 under beta_i=0\.1, beta_r=0 "):
            reconstruct(problem, method_options("battus-z", beta_r=0.0), backend=backend, keep_posteriors=keep)
    assert reconstruct(problem, method_options("battus-z"), backend=backend).states.shape == (T + 1, 40)
