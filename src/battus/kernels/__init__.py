"""Numba kernels, one module per stage and backend: ``<stage>_cpu`` (njit, parallel) beside ``<stage>_cuda``.

Stages: ``infer`` (mean-field pressures, forward-backward, decoding and
projection), ``fit`` (Eq. 4 for a batch of rate candidates), ``causal`` (the
graph-causal repair of Battus-C), ``simulate`` (the SI/SIR step), ``graph`` (weak
components and relabelling while a graph is cleaned; CPU only). Per-vertex
rules both backends need are plain functions compiled by each:
:mod:`~battus.kernels.vertex_rules` (forward-backward steps, threshold and MAP
decoding, projection, the SIR step), :mod:`~battus.kernels.rng` (the
counter-based draw) and the ``*_py`` rules of :mod:`~battus.kernels.causal_cpu`.
The backends (:mod:`battus.backends`) launch them; the stage drivers never
branch on the backend.

Layouts (n vertices, T+1 frames, K observed frames, C rate candidates):

* graph: in-neighbour CSR ``indptr`` int64 (n+1,), ``indices`` int32 (m,)
* ``obs_index`` int64 (T+1,): row of ``obs_states`` observed at frame t, or -1
* ``obs_states`` uint8 (K, n)
* pressures ``rho`` (T+1, n): rho[t, u] = prod_{v->u} (1 - beta_i * fI[t, v])
  (the CUDA backend keeps log rho, float32)
* posteriors ``gamma`` (3, T+1, n): state-major, each state time-major
* hitting times ``t_inf``, ``t_rec`` int64 (n,), sentinel T+1 = never
* decoded states uint8 (T+1, n): 0 = S, 1 = I, 2 = R
"""
