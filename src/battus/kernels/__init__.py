"""Numba kernels: ``cpu`` (njit, parallel) and ``cuda`` (numba-cuda).

Both backends expose the same primitives with the same array layouts, so the
drivers in :mod:`battus.infer`, :mod:`battus.fit` and :mod:`battus.decode`
never branch on the backend beyond picking the module.

Layouts (n vertices, T+1 frames, K observed frames, C rate candidates):

* graph: in-neighbour CSR ``indptr`` int64 (n+1,), ``indices`` int32 (m,)
* ``obs_index`` int64 (T+1,): row of ``obs_states`` observed at frame t, or -1
* ``obs_states`` uint8 (K, n)
* pressures ``rho`` (T+1, n): rho[t, u] = prod_{v->u} (1 - beta_i * fI[t, v])
* posteriors ``gamma`` (3, T+1, n): state-major, each state time-major
* hitting times ``t_inf``, ``t_rec`` int64 (n,), sentinel T+1 = never
* decoded states uint8 (T+1, n): 0 = S, 1 = I, 2 = R
"""
