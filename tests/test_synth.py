"""Synthetic Chung-Lu scale graphs: exact sizes, valid CSR, heavy tails, determinism."""

from __future__ import annotations

import numpy as np
import pytest
from naive import naive_chung_lu

from battus.errors import InputError
from battus.graph import is_symmetric
from battus.synth import SCALE_PRESETS, chung_lu, scale_graph


def _check_csr(g, n, m):
    assert g.n == n and g.m == m
    assert g.indptr.dtype == np.int64 and g.indices.dtype == np.int32
    assert g.indptr[0] == 0 and g.indptr[-1] == m and np.all(np.diff(g.indptr) >= 0)
    assert g.indices.min() >= 0 and g.indices.max() < n
    src, dst = g.arcs()
    assert not np.any(src == dst)  # no self-loops
    keys = dst * n + src
    assert np.all(np.diff(keys) > 0)  # rows sorted, no duplicate arcs


@pytest.mark.parametrize("directed", [True, False])
def test_exact_size_and_valid_csr(directed):
    g = chung_lu(2000, 20_000, directed=directed, seed=1)
    _check_csr(g, 2000, 20_000)
    assert g.directed == directed
    if not directed:
        assert is_symmetric(g)


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize(("n", "m", "gamma", "seed"),
                         [(300, 4_000, 2.3, 0), (2_000, 30_000, 2.6, 3), (50, 600, 3.5, 9)])
def test_same_graph_as_the_naive_draw(directed, n, m, gamma, seed):
    """The sort-based duplicate removal and partial surplus draw give the graph of the plain one."""
    g = chung_lu(n, m, gamma_in=gamma, directed=directed, seed=seed)
    indptr, indices = naive_chung_lu(n, m, gamma, directed, seed)
    np.testing.assert_array_equal(g.indptr, indptr)
    np.testing.assert_array_equal(g.indices, indices)


def test_heavy_tail_and_determinism():
    a = chung_lu(5000, 50_000, gamma_in=2.2, seed=7)
    b = chung_lu(5000, 50_000, gamma_in=2.2, seed=7)
    c = chung_lu(5000, 50_000, gamma_in=2.2, seed=8)
    np.testing.assert_array_equal(a.indptr, b.indptr)
    np.testing.assert_array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)
    deg = a.in_degree()
    assert deg.max() > 20 * deg.mean()  # hubs far above the mean degree
    # hubs are spread over the id range, not clustered at low ids
    top = np.argsort(deg)[-20:]
    assert top.max() > 1000


def test_steeper_exponent_gives_lighter_tail():
    heavy = chung_lu(5000, 40_000, gamma_in=2.1, seed=3).in_degree().max()
    light = chung_lu(5000, 40_000, gamma_in=3.0, seed=3).in_degree().max()
    assert heavy > 2 * light


def test_bad_arguments():
    with pytest.raises(InputError):
        chung_lu(1, 0)
    with pytest.raises(InputError):
        chung_lu(100, 11, directed=False)
    with pytest.raises(InputError):
        chung_lu(100, 100, gamma_in=1.0)
    with pytest.raises(InputError):
        chung_lu(10, 90)
    with pytest.raises(InputError):
        scale_graph("no-such-graph")


def test_presets_have_the_paper_sizes():
    assert SCALE_PRESETS["orkut"].arcs == 2 * 117_185_083
    assert (SCALE_PRESETS["livejournal"].n, SCALE_PRESETS["livejournal"].arcs) == (4_843_953, 68_466_754)
    assert (SCALE_PRESETS["web-stanford"].n, SCALE_PRESETS["web-stanford"].arcs) == (255_265, 2_234_572)
    assert (SCALE_PRESETS["web-google"].n, SCALE_PRESETS["web-google"].arcs) == (855_802, 5_066_842)
