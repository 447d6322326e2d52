"""Graph input: edge-list files, scipy and networkx, against a naive reference."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from battus.edgelist import read_edgelist
from battus.errors import InputError
from battus.graph import (
    Graph,
    from_networkx,
    from_scipy,
    graph_from_raw_arcs,
    is_symmetric,
)

# The mirror beside the checkout (../shared); BATTUS_SHARED overrides, as in conftest.py.
SHARED = Path(os.environ.get("BATTUS_SHARED", Path(__file__).resolve().parents[2] / "shared"))
SNAP_MIRROR = SHARED / "data" / "snap"
OREGON_PT = SHARED / "data" / "ditto" / "oregon2" / "oregon2-si.pt"


# --------------------------------------------------------------------------
# Naive pure-Python reference
# --------------------------------------------------------------------------


def reference(pairs, directed, keep_lcc=True, relabel="appearance"):
    """Arc set (original ids), vertex order and counts, computed the slow obvious way."""
    order = []
    seen = set()
    for u, v in pairs:
        for x in (u, v):
            if x not in seen:
                seen.add(x)
                order.append(x)
    if relabel == "sorted":
        order = sorted(order)
    loops = sum(1 for u, v in pairs if u == v)
    units = set()
    for u, v in pairs:
        if u != v:
            units.add((u, v) if directed else frozenset((u, v)))
    arcs = set()
    for unit in units:
        if directed:
            arcs.add(unit)
        else:
            a, b = tuple(unit)
            arcs.update({(a, b), (b, a)})
    vertices = list(order)
    if keep_lcc and vertices:
        adj = {x: set() for x in vertices}
        for u, v in arcs:
            adj[u].add(v)
            adj[v].add(u)
        comp = {}
        comps = []
        for x in vertices:  # BFS in label order: ties go to the smallest label
            if x in comp:
                continue
            members = [x]
            comp[x] = len(comps)
            stack = [x]
            while stack:
                y = stack.pop()
                for z in adj[y]:
                    if z not in comp:
                        comp[z] = len(comps)
                        members.append(z)
                        stack.append(z)
            comps.append(members)
        best = max(range(len(comps)), key=lambda c: (len(comps[c]), -c))
        keep = set(comps[best])
        vertices = [x for x in vertices if x in keep]
        arcs = {(u, v) for u, v in arcs if u in keep and v in keep}
    return {
        "vertices": vertices,
        "arcs": arcs,
        "lines": len(pairs),
        "loops": loops,
        "duplicates": len(pairs) - loops - len(units),
        "n_before": len(order),
        "units_before": len(units),
    }


def graph_arcs(graph: Graph) -> set:
    """Arcs of ``graph`` in original ids."""
    out = set()
    for u in range(graph.n):
        for v in graph.indices[graph.indptr[u]:graph.indptr[u + 1]]:
            out.add((int(graph.node_ids[v]), int(graph.node_ids[u])))
    return out


def check_csr(graph: Graph) -> None:
    assert graph.indptr.dtype == np.int64 and graph.indices.dtype == np.int32
    assert graph.node_ids.dtype == np.int64
    assert graph.indptr[0] == 0 and graph.indptr[-1] == graph.m
    assert np.all(np.diff(graph.indptr) >= 0)
    for u in range(graph.n):
        row = graph.indices[graph.indptr[u]:graph.indptr[u + 1]]
        assert np.all(np.diff(row) > 0), "rows sorted, no duplicates"
        assert not np.any(row == u), "no self-loops"
    if graph.n:
        assert graph.indices.min(initial=0) >= 0 and graph.indices.max(initial=0) < graph.n


def check_against_reference(graph: Graph, pairs, directed, keep_lcc=True, relabel="appearance"):
    ref = reference(pairs, directed, keep_lcc, relabel)
    check_csr(graph)
    assert graph.directed == directed
    assert graph.node_ids.tolist() == ref["vertices"]
    assert graph_arcs(graph) == ref["arcs"]
    meta = graph.meta
    assert meta["input_lines"] == ref["lines"]
    assert meta["self_loops_dropped"] == ref["loops"]
    assert meta["duplicates_dropped"] == ref["duplicates"]
    assert meta["vertices_before_lwcc"] == ref["n_before"]
    assert meta["edges_before_lwcc"] == ref["units_before"]
    assert meta["arcs_before_lwcc"] == ref["units_before"] * (1 if directed else 2)
    assert meta["vertices_after_lwcc"] == graph.n == len(ref["vertices"])
    assert meta["arcs_after_lwcc"] == graph.m == len(ref["arcs"])
    assert meta["edges_after_lwcc"] == graph.num_edges
    if not directed:
        assert is_symmetric(graph)


def random_pairs(rng, n_ids=40, components=4, lines=120, id_scale=1000):
    """Edge list over several components, with self-loops, duplicates and reversed copies."""
    ids = rng.choice(id_scale, size=n_ids, replace=False).tolist()
    groups = np.array_split(np.array(ids), components)
    pairs = []
    for _ in range(lines):
        g = groups[int(rng.integers(len(groups)))]
        u, v = (int(x) for x in rng.choice(g, size=2))
        pairs.append((u, v))
    pairs += [(v, u) for u, v in pairs[: lines // 10]]  # reversed duplicates
    pairs += pairs[: lines // 10]  # exact duplicates
    pairs += [(ids[0], ids[0])]  # a self-loop
    order = rng.permutation(len(pairs))
    return [pairs[i] for i in order]



def _write_text(path: Path, text: str) -> Path:
    """Write ``text`` to ``path``, gzip-compressed when the name ends in .gz."""
    if path.name.endswith(".gz"):
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def write_snap(path: Path, pairs, sep="\t", extra=False, comments=True):
    lines = ["# Directed graph: test", "# FromNodeId\tToNodeId"] if comments else []
    for i, (u, v) in enumerate(pairs):
        row = f"{u}{sep}{v}"
        if extra:
            row += f"{sep}{i * 7}{sep}1.5"
        lines.append(row)
        if i == len(pairs) // 2 and comments:
            lines.append("# a comment in the middle")
            lines.append("")
    return _write_text(path, "\n".join(lines) + "\n")


def write_csv(path: Path, pairs, header=True):
    lines = ["source,target,weight"] if header else []
    lines += [f"{u},{v},{(u * 31 + v) % 7}" for u, v in pairs]
    return _write_text(path, "\n".join(lines) + "\n")


# --------------------------------------------------------------------------
# Edge lists against the reference
# --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("directed", [True, False])
def test_snap_text_matches_reference(tmp_path, seed, directed):
    rng = np.random.default_rng(seed)
    pairs = random_pairs(rng, components=1 + seed % 4)
    path = write_snap(tmp_path / "g.txt", pairs, sep="\t" if seed % 2 else " ")
    graph = read_edgelist(path, directed=directed)
    check_against_reference(graph, pairs, directed)
    assert graph.name == "g" and graph.meta["format"] == "snap"


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("keep_lcc", [True, False])
@pytest.mark.parametrize("relabel", ["appearance", "sorted"])
@pytest.mark.parametrize("spread", [False, True])
def test_options_match_reference(tmp_path, directed, keep_lcc, relabel, spread):
    rng = np.random.default_rng(11)
    pairs = random_pairs(rng, components=3)
    if spread:  # ids too far apart for a lookup table (and some negative): hash/sort paths
        pairs = [((u - 500) * 10**12 + 3, (v - 500) * 10**12 + 3) for u, v in pairs]
    path = write_snap(tmp_path / "g.txt", pairs)
    graph = read_edgelist(path, directed=directed, keep_largest_component=keep_lcc, relabel=relabel)
    check_against_reference(graph, pairs, directed, keep_lcc, relabel)


@pytest.mark.parametrize("directed", [True, False])
def test_gzip_and_extra_columns(tmp_path, directed):
    rng = np.random.default_rng(3)
    pairs = random_pairs(rng, components=2)
    plain = read_edgelist(write_snap(tmp_path / "g.txt", pairs), directed=directed)
    gz = read_edgelist(write_snap(tmp_path / "g.txt.gz", pairs, extra=True), directed=directed)
    check_against_reference(gz, pairs, directed)
    assert np.array_equal(plain.indptr, gz.indptr)
    assert np.array_equal(plain.indices, gz.indices)
    assert np.array_equal(plain.node_ids, gz.node_ids)
    assert gz.name == "g"


@pytest.mark.parametrize("header", [True, False])
@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("directed", [True, False])
def test_csv_matches_reference(tmp_path, header, gz, directed):
    rng = np.random.default_rng(5)
    pairs = random_pairs(rng, components=3)
    path = write_csv(tmp_path / ("g.csv.gz" if gz else "g.csv"), pairs, header=header)
    graph = read_edgelist(path, directed=directed)
    assert graph.meta["format"] == "csv"
    check_against_reference(graph, pairs, directed)
    explicit = read_edgelist(path, directed=directed, fmt="csv")
    assert np.array_equal(explicit.indices, graph.indices)


def test_csv_detected_by_comma_and_comments(tmp_path):
    path = tmp_path / "edges.dat"
    path.write_text("# made by hand\nfrom,to\n1,2\n2, 3\n# more\n\n3,1\n9,10\n")
    graph = read_edgelist(path, directed=True)
    assert graph.meta["format"] == "csv"
    assert graph_arcs(graph) == {(1, 2), (2, 3), (3, 1)}
    assert graph.meta["vertices_before_lwcc"] == 5


def test_crlf_and_large_ids(tmp_path):
    big = 2**40
    path = tmp_path / "g.txt"
    path.write_bytes(f"# x\r\n{big} 7\r\n7 {big + 5}\r\n{big + 5} {big}\r\n".encode())
    graph = read_edgelist(path, directed=True)
    assert graph.node_ids.tolist() == [big, 7, big + 5]
    assert graph_arcs(graph) == {(big, 7), (7, big + 5), (big + 5, big)}


def test_larger_random_graph(tmp_path):
    """Many lines through several pandas chunks (chunk size shrunk) give the same graph."""
    import battus.edgelist as edgelist_module

    rng = np.random.default_rng(1)
    src = rng.integers(0, 3000, size=50_000)
    dst = rng.integers(0, 3000, size=50_000)
    path = tmp_path / "big.txt.gz"
    with gzip.open(path, "wt") as fh:
        fh.write("".join(f"{u}\t{v}\n" for u, v in zip(src, dst, strict=True)))
    whole = read_edgelist(path, directed=True)
    old = edgelist_module._CHUNK_ROWS
    edgelist_module._CHUNK_ROWS = 4096
    try:
        chunked = read_edgelist(path, directed=True)
    finally:
        edgelist_module._CHUNK_ROWS = old
    assert np.array_equal(whole.indptr, chunked.indptr)
    assert np.array_equal(whole.indices, chunked.indices)
    direct = graph_from_raw_arcs(src, dst, directed=True)
    assert np.array_equal(whole.indices, direct.indices)
    assert whole.meta["input_lines"] == 50_000


# --------------------------------------------------------------------------
# Malformed input
# --------------------------------------------------------------------------


MALFORMED = {
    "non-integer": ("g.txt", b"# c\n1 2\n3 x\n4 5\n", "line 3"),
    "float": ("g.txt", b"1 2\n3 4.5\n", "line 2"),
    "single column first": ("g.txt", b"# c\n1\n2 3\n", "line 2"),
    "single column later": ("g.txt", b"1 2\n2 3\n4\n5 6\n", "line 3"),
    "empty": ("g.txt", b"", "no edges"),
    "only comments": ("g.txt", b"# nothing\n\n# here\n", "no edges"),
    "overflow": ("g.txt", b"1 2\n99999999999999999999 3\n", "line 2"),
    "csv non-integer": ("g.csv", b"a,b\n1,2\n3,zz\n", "line 3"),
    "csv single column": ("g.csv", b"a\n1\n2\n", "line 1"),
    "csv empty field": ("g.csv", b"1,2\n3,\n", "line 2"),
    "header in snap": ("g.txt", b"source target\n1 2\n", "line 1"),
    "not gzip": ("g.txt.gz", b"1 2\n2 3\n", "gzip"),
    "binary": ("g.txt", bytes(range(256)) * 4, ""),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_input_raises(tmp_path, case):
    name, data, where = MALFORMED[case]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        read_edgelist(path, directed=True)
    message = str(info.value)
    assert str(path) in message and where in message
    assert "\n" not in message


def test_truncated_gzip(tmp_path):
    good = tmp_path / "good.txt.gz"
    with gzip.open(good, "wt") as fh:
        fh.write("".join(f"{i} {i + 1}\n" for i in range(20_000)))
    data = good.read_bytes()
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as info:
        read_edgelist(bad, directed=True)
    assert str(bad) in str(info.value) and info.value.field == "gzip"
    corrupt = tmp_path / "corrupt.txt.gz"
    corrupt.write_bytes(data[:10] + b"\x00" * 64 + data[74:])
    with pytest.raises(InputError) as info:
        read_edgelist(corrupt, directed=True)
    assert str(corrupt) in str(info.value)


def test_missing_file_and_bad_options(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_edgelist(tmp_path / "missing.txt", directed=True)
    path = write_snap(tmp_path / "g.txt", [(1, 2)])
    with pytest.raises(InputError, match="fmt"):
        read_edgelist(path, directed=True, fmt="json")
    with pytest.raises(InputError, match="relabel"):
        read_edgelist(path, directed=True, relabel="random")


@pytest.mark.parametrize("keep_all", [False, True])
def test_only_self_loops_is_an_empty_graph(tmp_path, keep_all):
    path = write_snap(tmp_path / "g.txt", [(1, 1), (2, 2), (2, 2)])
    with pytest.raises(InputError, match=r"edges: no edge left after cleaning \(3 self-loops"):
        read_edgelist(path, directed=False, keep_largest_component=not keep_all)


# --------------------------------------------------------------------------
# scipy and networkx
# --------------------------------------------------------------------------


@pytest.mark.parametrize("directed", [True, False])
def test_from_scipy(directed):
    import scipy.sparse as sp

    rng = np.random.default_rng(7)
    n = 30
    dense = (rng.random((n, n)) < 0.08).astype(float)
    dense[3, 3] = 1.0  # self-loop: dropped
    matrix = sp.csr_array(dense)
    matrix.data[0] = 0.0  # explicit zero: not an arc
    graph = from_scipy(matrix, directed=directed)
    check_csr(graph)
    assert graph.n == n and graph.node_ids.tolist() == list(range(n))
    dense = matrix.toarray()
    want = {(i, j) for i, j in zip(*np.nonzero(dense), strict=True) if i != j}
    if not directed:
        want |= {(j, i) for i, j in want}
    assert graph_arcs(graph) == want
    assert from_scipy(dense, directed=directed).indices.tolist() == graph.indices.tolist()
    lcc = from_scipy(matrix, directed=directed, keep_largest_component=True)
    pairs = [(int(i), int(j)) for i, j in zip(*np.nonzero(dense), strict=True)]
    ref = reference(pairs, directed, relabel="sorted")
    assert graph_arcs(lcc) == ref["arcs"]


def test_from_scipy_rejects_non_square():
    import scipy.sparse as sp

    with pytest.raises(InputError, match="square"):
        from_scipy(sp.csr_array(np.ones((2, 3))), directed=True)


@pytest.mark.parametrize("directed", [True, False])
def test_from_networkx_integer_labels(directed):
    import networkx as nx

    rng = np.random.default_rng(9)
    pairs = random_pairs(rng, components=3)
    G = nx.DiGraph() if directed else nx.Graph()
    G.add_edges_from(pairs)
    G.add_node(99_999)  # isolated vertex: kept unless the LWCC is asked for
    graph = from_networkx(G)
    check_csr(graph)
    assert graph.directed == directed
    assert graph.node_ids.tolist() == list(G.nodes)
    ref = reference(pairs, directed, keep_lcc=False)
    assert graph_arcs(graph) == ref["arcs"]
    lcc = from_networkx(G, keep_largest_component=True)
    ref = reference(pairs, directed, keep_lcc=True)
    assert graph_arcs(lcc) == ref["arcs"]
    assert lcc.node_ids.tolist() == ref["vertices"]


def test_from_networkx_string_labels_and_multigraph():
    import networkx as nx

    G = nx.MultiDiGraph()
    G.add_edges_from([("a", "b"), ("a", "b"), ("b", "c"), ("c", "c"), ("x", "y")])
    graph = from_networkx(G)
    assert graph.directed
    assert graph.meta["labels"] == ["a", "b", "c", "x", "y"]
    assert graph.node_ids.tolist() == [0, 1, 2, 3, 4]
    assert graph_arcs(graph) == {(0, 1), (1, 2), (3, 4)}
    lcc = from_networkx(G, keep_largest_component=True)
    assert lcc.meta["labels"] == ["a", "b", "c"] and lcc.n == 3
    undirected = from_networkx(nx.path_graph(["p", "q", "r"]))
    assert not undirected.directed and undirected.num_edges == 2 and is_symmetric(undirected)


# --------------------------------------------------------------------------
# The real SNAP Oregon2 file against the paper and the canonical export
# --------------------------------------------------------------------------


def test_oregon2_from_snap_mirror(tmp_path):
    from battus.download import SNAP_DATASETS, fetch
    from battus.hermes import canonical_from_pt

    assert SNAP_MIRROR.is_dir(), f"shared mirror missing: {SNAP_MIRROR}"
    ds = SNAP_DATASETS["oregon2"]
    path = fetch(ds.url, tmp_path, sha256=ds.sha256, mirror=SNAP_MIRROR, progress=False)
    graph = read_edgelist(path, directed=False)
    assert (graph.n, graph.num_edges) == (11_461, 32_730) == (ds.n, ds.edges)
    assert graph.meta["input_lines"] == 32_731 and graph.meta["duplicates_dropped"] == 1
    assert graph.meta["self_loops_dropped"] == 0
    check_csr(graph)
    # Vertices numbered in order of first appearance reproduce the canonical
    # DITTO export exactly: the relabelling between them is the identity.
    canonical = canonical_from_pt(OREGON_PT).graph
    assert not canonical.directed
    assert np.array_equal(graph.indptr, canonical.indptr)
    assert np.array_equal(graph.indices, canonical.indices)
    # With sorted ids the graph is the same up to that relabelling.
    by_id = read_edgelist(path, directed=False, relabel="sorted")
    perm = np.searchsorted(by_id.node_ids, graph.node_ids)  # appearance label -> sorted label
    src, dst = canonical.arcs()
    assert graph_arcs(by_id) == {
        (int(by_id.node_ids[perm[s]]), int(by_id.node_ids[perm[d]]))
        for s, d in zip(src, dst, strict=True)
    }
