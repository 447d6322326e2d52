"""Torch-free import of the canonical exports and the Pol-SI rebuild."""

from __future__ import annotations

import numpy as np
from conftest import DITTO, load_canonical

from battus.hermes import load_pt


def test_pt_fields_and_states():
    data = load_pt(DITTO / "synthetic/ba-sir.pt")
    assert data["edge_index"].shape == (2, 7968) and data["edge_index"].dtype == np.int64
    assert data["y"].shape == (1000, 11)
    assert data["T"] == 10
    # tI / tR agree with the first frame in each state
    y = data["y"]
    t_inf = np.where((y >= 1).any(1), np.argmax(y >= 1, axis=1), 11)
    assert np.array_equal(np.minimum(data["tI"], 11), np.minimum(t_inf, 11))


def test_pol_rebuild_matches_ditto():
    pol = load_canonical("pol-si")
    assert (pol.graph.n, pol.graph.num_edges, pol.T, pol.n0) == (18470, 48053, 40, 3492)
    assert not pol.graph.directed
    assert pol.model == "si"
    assert np.all(np.diff(pol.truth.astype(int), axis=0) >= 0)


def test_graph_is_in_neighbour_csr():
    canon = load_canonical("farmers-si")
    data = load_pt(DITTO / "farmers/farmers-si.pt")
    src, dst = canon.graph.arcs()
    got = set(zip(src.tolist(), dst.tolist(), strict=True))
    want = set(zip(data["edge_index"][0].tolist(), data["edge_index"][1].tolist(), strict=True))
    assert got == want  # self-loops of the export are kept (the paper's |E| = 230 counts them)
    assert canon.graph.indices.dtype == np.int32 and canon.graph.indptr.dtype == np.int64
