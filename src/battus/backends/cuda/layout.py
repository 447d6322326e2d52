"""A problem as the CUDA backend holds it: the upload, the gather order, the degree bins of the
pressure gathers and the work items of the fitting steps (built on the host, uploaded once).

Only the gathered marginals and the fitting state are stored in gather order
(:func:`gather_order`); rows, pressures, posteriors and outputs keep the
caller's vertex ids.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...kernels import layout_cuda
from ...kernels.cuda_common import BLOCK, WARP, blocks
from ...problem import Problem, segments, settled_frame
from ..base import Prepared
from .memory import DeviceMemory, inference_bytes, work_items_bytes
from .settings import CUDASettings


@dataclass
class CUDAPrepared(Prepared):
    """A problem as held on the device, plus the degree bins and work items of its graph."""

    bins: dict
    items: dict
    gather_id: Any = None
    gather_indices: Any = None
    # the key under which every fitting worker holds this problem (None: no workers)
    worker_key: int | None = None
    # battus.backends.cuda.rounds.segment_pieces of the observed frames by number of parts, computed
    # once per problem (the cut is a small dynamic programme that every round asks for)
    pieces: dict = field(default_factory=dict)
    # what a compact fitting step needs of the host side, and its work items by snapshot, built when
    # a pass first resets to that snapshot (compact_items)
    host_indptr: Any = None
    host_gather_id: Any = None
    host_obs_states: Any = None
    compact: dict = field(default_factory=dict)


# A problem is uploaded in one thread while a warm-up uploads its tiny one in another, and Numba-CUDA
# loads a kernel into a context unguarded: two threads launching one for the first time at once
# both load it, and the second fails ("key already in dictionary"). Once loaded, a launch holds
# this for microseconds.
_LAUNCHING = threading.Lock()


def upload(memory: DeviceMemory, problem: Problem, settings: CUDASettings, threads: int,
           fit: bool = True) -> CUDAPrepared:
    """Graph and observations on the device, with the degree bins, and the fitting work items when
    ``fit`` (a reconstruction at given rates never reads them).

    First checks that the problem's device arrays fit (:func:`battus.backends.cuda.memory.inference_bytes`).
    """
    memory.require(
        inference_bytes(problem.n, problem.graph.m, problem.T, problem.observations.times.shape[0], settings),
        f"a graph of {problem.n:,} vertices and {problem.graph.m:,} arcs over {problem.T + 1} frames")
    obs = problem.observations
    left, right = segments(obs.times, problem.T)
    obs_index = obs.index(problem.T)
    indptr = np.ascontiguousarray(problem.graph.indptr, dtype=np.int64)
    indices = np.ascontiguousarray(problem.graph.indices, dtype=np.int32)
    prep = CUDAPrepared(
        n=problem.n,
        T=problem.T,
        indptr=memory.upload(indptr),
        indices=memory.upload(indices),
        obs_times=memory.upload(np.asarray(obs.times, dtype=np.int64)),
        obs_states=memory.upload(np.asarray(obs.states, dtype=np.uint8)),
        obs_index=memory.upload(obs_index),
        seg_left=memory.upload(left),
        seg_right=memory.upload(right),
        host_obs_times=np.asarray(obs.times, dtype=np.int64),
        host_obs_index=obs_index,
        settled_frame=settled_frame(obs.times, obs.states, problem.T),
        bins={},
        items={},
    )
    # the degree bins first: host work that needs no kernel, done while a warm-up in another thread
    # may still be loading the kernels the next steps launch
    prep.bins = build_bins(memory, indptr, settings, threads)
    # the layout's two passes over every arc run on the device, which holds the arcs already
    counts = memory.upload(np.zeros(problem.n, dtype=np.int64))
    grid = blocks(indices.shape[0], BLOCK)
    if indices.shape[0]:
        with _LAUNCHING:
            layout_cuda.count_sources[grid, BLOCK](prep.indices, counts)
    gather_id = gather_order(counts.copy_to_host())
    del counts
    prep.gather_id = memory.upload(gather_id)
    prep.gather_indices = memory.alloc(indices.shape[0], np.int32)
    if indices.shape[0]:
        with _LAUNCHING:
            layout_cuda.renumber_sources[grid, BLOCK](prep.gather_id, prep.indices, prep.gather_indices)
    if fit:
        prep.items = build_items(memory, indptr, gather_id, settings.item_arcs)
    prep.host_indptr, prep.host_gather_id, prep.host_obs_states = indptr, gather_id, obs.states
    return prep


def gather_order(times_gathered: np.ndarray) -> np.ndarray:
    """Position of each vertex in the arrays the pressure kernels gather from, given how often each
    is gathered (its out-degree, ``np.bincount(indices, minlength=n)``).

    Vertices are ranked by that count, ties by id, so the marginals of hubs share cache lines and
    stay in L1/L2: with power-law degrees the top 10% of sources take about 40% of all gathers.
    """
    n = times_gathered.shape[0]
    rank = descending_order(times_gathered)
    gather_id = np.empty(n, dtype=np.int32)
    gather_id[rank] = np.arange(n, dtype=np.int32)
    return gather_id


def descending_order(counts: np.ndarray) -> np.ndarray:
    """``np.argsort(-counts, kind="stable")`` for counts >= 0 (largest first, ties by position), in
    linear time for the counts below 65,535: numpy sorts 16-bit keys by radix and wider ones by
    merging, which took 0.3 s for the 3 M out-degrees of an Orkut-sized graph."""
    top = (1 << 16) - 1
    # descending as ascending: a count c < top has the key top - c >= 1; every larger one the key
    # 0, so the hubs come first, by position, and are then ordered among themselves
    key = np.empty(counts.shape, dtype=np.uint16)
    np.minimum(counts, top, out=key, casting="unsafe")  # one pass: every value fits after the minimum
    np.subtract(top, key, out=key)
    order = np.argsort(key, kind="stable")
    hubs = int(np.count_nonzero(counts >= top))
    if hubs:
        first = order[:hubs]
        order[:hubs] = first[np.argsort(-counts[first], kind="stable")]
    return order


def build_bins(memory: DeviceMemory, indptr: np.ndarray, settings: CUDASettings, threads: int) -> dict:
    """The degree bins of :func:`battus.kernels.infer_cuda.pressure_binned` (``settings`` says
    which degrees go where), for blocks of ``threads`` threads.

    The thread bin stays in vertex order: neighbouring threads then read
    neighbouring CSR rows, which share sectors (sorted by degree, the pull
    step ran slower). Warp-bin vertices read their own rows coalesced, so
    there degree order only groups warps of similar work into a block.
    """
    deg = np.diff(indptr)
    thread_verts = np.nonzero(deg < settings.warp_min_degree)[0].astype(np.int32)
    warp_verts = np.nonzero((deg >= settings.warp_min_degree) & (deg < settings.hub_min_degree))[0]
    warp_verts = warp_verts[descending_order(deg[warp_verts])]
    hub_verts = np.nonzero(deg >= settings.hub_min_degree)[0]
    chunk = settings.hub_chunk
    per_hub = (deg[hub_verts] + chunk - 1) // chunk
    hub_ptr = np.zeros(hub_verts.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_hub, out=hub_ptr[1:])
    owner = np.repeat(np.arange(hub_verts.shape[0]), per_hub)
    offset = np.arange(int(hub_ptr[-1]), dtype=np.int64) - hub_ptr[owner]
    hub_start = indptr[hub_verts][owner] + offset * chunk
    hub_end = np.minimum(hub_start + chunk, indptr[hub_verts + 1][owner])
    warps_per_block = threads // WARP
    return {
        "thread_verts": memory.upload(thread_verts),
        "warp_verts": memory.upload(warp_verts.astype(np.int32)),
        "hub_verts": memory.upload(hub_verts.astype(np.int32)),
        "hub_ptr": memory.upload(hub_ptr),
        "hub_start": memory.upload(hub_start.astype(np.int64)),
        "hub_end": memory.upload(hub_end.astype(np.int64)),
        "hub_vertex": memory.upload(hub_verts[owner].astype(np.int32)),  # each chunk's vertex
        "partial": memory.alloc(max(1, int(hub_ptr[-1])), np.float64),
        "n_thread_blocks": (thread_verts.shape[0] + threads - 1) // threads,
        "n_warp_blocks": (warp_verts.shape[0] + warps_per_block - 1) // warps_per_block,
        "n_hub_chunks": int(hub_ptr[-1]),
        "n_hubs": int(hub_verts.shape[0]),
        "max_degree": int(deg.max()) if deg.size else 0,
    }


def build_items(memory: DeviceMemory, indptr: np.ndarray, gather_id: np.ndarray, item_arcs: int,
                vertices: np.ndarray | None = None) -> dict:
    """Fitting work items: each vertex's in-arcs in ranges of at most ``item_arcs``, a vertex of
    several ranges (split) summed from its partials (:func:`battus.kernels.fit_cuda.batch_finish_split`).
    Every vertex, or only ``vertices`` (ascending ids: a compact step's, :func:`compact_items`)."""
    if vertices is None:
        vertices = np.arange(indptr.shape[0] - 1, dtype=np.int64)
    deg = indptr[vertices + 1] - indptr[vertices]
    per_vertex = np.maximum(1, (deg + item_arcs - 1) // item_arcs)
    ptr = np.zeros(vertices.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_vertex, out=ptr[1:])
    total = int(ptr[-1])
    position = np.repeat(np.arange(vertices.shape[0], dtype=np.int64), per_vertex)
    vertex = vertices[position]
    offset = np.arange(total, dtype=np.int64) - ptr[position]
    start = indptr[vertex] + offset * item_arcs
    end = np.minimum(start + item_arcs, indptr[vertex + 1])
    split = per_vertex[position] > 1
    slot = np.full(total, -1, dtype=np.int64)
    slot[split] = np.arange(int(split.sum()), dtype=np.int64)
    split_vertex = vertices[per_vertex > 1]
    split_ptr = np.zeros(split_vertex.shape[0] + 1, dtype=np.int64)
    np.cumsum(per_vertex[per_vertex > 1], out=split_ptr[1:])
    # largest items first: blocks of similar work, short tail (slots stay with their items)
    order = descending_order(end - start)
    vertex, start, end, slot = vertex[order], start[order], end[order], slot[order]
    return {
        "vertex": memory.upload(gather_id[vertex]),  # state rows are in gather order
        "start": memory.upload(start),
        "end": memory.upload(end),
        "slot": memory.upload(slot),
        "split_vertex": memory.upload(gather_id[split_vertex]),
        "split_ptr": memory.upload(split_ptr),
        "n_items": total,
        "mean_arcs": int(deg.sum()) / total if total else 0.0,
        "n_split": int(split_vertex.shape[0]),
        "n_slots": int(split.sum()),
    }


def compact_items(memory: DeviceMemory, prep: CUDAPrepared, snapshot: int, item_arcs: int) -> dict:
    """The work items of the vertices observed S at ``snapshot``, and ``held``: the state rows of
    those observed I (:func:`battus.kernels.fit_cuda.batch_advance_held`); built the first time a
    pass resets every lane to that snapshot and kept with the problem.

    After such a reset a vertex observed I or R has f_S = 0.0 in every lane
    until the next reset, so it gathers nothing
    (:func:`battus.kernels.fit_cuda._absorbed`) and advances with L = 0: one
    observed R keeps its marginals and its term (the reset wrote it into both
    term buffers), one observed I advances in ``batch_advance_held``. The
    steps after the reset (*compact* steps) then launch work items only for
    the vertices observed S: the same values bit for bit, without a warp on
    each absorbed vertex's items.
    """
    layout = prep.compact.get(snapshot)
    if layout is None:
        states = np.asarray(prep.host_obs_states[snapshot])
        susceptible = np.nonzero(states == 0)[0].astype(np.int64)
        indptr = prep.host_indptr
        arcs = int((indptr[susceptible + 1] - indptr[susceptible]).sum())
        held_bytes = 4 * prep.n  # at most every vertex is observed I
        memory.require(work_items_bytes(susceptible.shape[0], arcs, item_arcs) + held_bytes,
                       f"the fitting steps after the snapshot {snapshot} of {prep.n:,} vertices")
        layout = build_items(memory, indptr, prep.host_gather_id, item_arcs, susceptible)
        # in row order, so that a warp's rows of the state lie in order
        held = np.sort(prep.host_gather_id[states == 1]).astype(np.int32)
        layout["held"], layout["n_held"] = memory.upload(held), int(held.shape[0])
        prep.compact[snapshot] = layout
    return layout
