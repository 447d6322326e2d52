"""Per-vertex rules that both backends need, written once as plain Python functions.

Each rule is compiled by each backend: :mod:`battus.kernels.infer_cpu` and
:mod:`battus.kernels.simulate_cpu` wrap it in ``numba.njit(inline="always")``,
:mod:`battus.kernels.infer_cuda` and :mod:`battus.kernels.simulate_cuda` in
``cuda.jit(device=True)``. A kernel only owns what genuinely differs between
the two machines: where the vertex loop runs (``prange`` or one thread per
vertex) and how arrays are stored (float64 on the CPU, float32 posteriors and
log-pressures on the GPU). The rules take scalars and read arrays by index,
so the same arithmetic runs on both, in the same order; the random draw of
the simulator is passed in compiled (:func:`sir_step_rule`).
"""

from __future__ import annotations

from .rng import STREAM_RECOVERY, STREAM_TRANSMISSION

# ----------------------------------------------------------------------------
# forward-backward (Eq. 5-6) of one vertex


def one_hot_py(y):
    """The message of an observed state y in {0 = S, 1 = I, 2 = R}: (1, 0, 0), (0, 1, 0) or (0, 0, 1)."""
    return (1.0 if y == 0 else 0.0), (1.0 if y == 1 else 0.0), (1.0 if y == 2 else 0.0)


def forward_step_py(a_s, a_i, a_r, q, p_inf, beta_r):
    """The forward message one frame on, normalised; ``(q, p_inf)`` is the transition's avoidance."""
    nxt_s = a_s * q
    infected = a_s * p_inf + a_i
    nxt_i = infected * (1.0 - beta_r)
    nxt_r = infected * beta_r + a_r
    z = nxt_s + nxt_i + nxt_r
    return nxt_s / z, nxt_i / z, nxt_r / z


def backward_step_py(d_s, d_i, d_r, q, p_inf, beta_r):
    """The backward message one frame back, normalised; ``(q, p_inf)`` is the transition's avoidance."""
    d_from_i = (1.0 - beta_r) * d_i + beta_r * d_r
    b_s = q * d_s + p_inf * d_from_i
    z = b_s + d_from_i + d_r
    return b_s / z, d_from_i / z, d_r / z


def posterior_py(a_s, a_i, a_r, d_s, d_i, d_r):
    """The posterior of one frame: forward times backward message, normalised."""
    g_s = a_s * d_s
    g_i = a_i * d_i
    g_r = a_r * d_r
    z = g_s + g_i + g_r
    return g_s / z, g_i / z, g_r / z


def forward_backward_rule(avoidance, one_hot, forward_step, backward_step, posterior):
    """The segment-wise dual-anchor forward-backward of one vertex over a backend's stored pressures.

    ``avoidance(pressures, t, u)`` gives ``(q, 1 - q)`` of vertex u's transition
    into frame t: the CPU reads q from float64 pressures and takes 1 - q; the
    GPU holds float32 log-pressures and takes ``exp(L)`` and ``-expm1(L)``,
    exact where q is near 1. Like the draw of :func:`sir_step_rule` it is a
    closure variable, so each backend binds its own compiled function; so are
    the step rules, the backend's compilations of :func:`one_hot_py`,
    :func:`forward_step_py`, :func:`backward_step_py` and :func:`posterior_py`.
    The CPU runs the same steps vertex-blocked instead
    (:func:`battus.kernels.infer_cpu.forward_backward`), in the same order for each vertex.
    """

    def forward_backward_vertex(pressures, beta_r, prior, seg_left, seg_right, obs_index, obs_states, backward,
                                gamma, u):
        """Posteriors of u in ``gamma`` (3, T+1, n). The transition t -> t+1 uses the pressure of
        frame t+1. Segment s spans frames seg_left[s]..seg_right[s]; its forward message starts
        from the observation at seg_left[s] (or ``prior`` when that frame is unobserved) and its
        backward message from the observation at seg_right[s] (or all ones when unobserved or
        ``backward`` is off). Later segments overwrite the shared boundary frame. The forward
        messages are stored in ``gamma`` itself and turned into posteriors during the backward
        sweep, so no per-vertex scratch memory is needed; both messages are normalised each step.
        """
        for s in range(seg_left.shape[0]):
            lo = seg_left[s]
            hi = seg_right[s]
            if obs_index[lo] >= 0:
                a_s, a_i, a_r = one_hot(obs_states[obs_index[lo], u])
            else:
                a_s, a_i, a_r = prior[0], prior[1], prior[2]
            gamma[0, lo, u] = a_s
            gamma[1, lo, u] = a_i
            gamma[2, lo, u] = a_r
            for t in range(lo, hi):
                q, p_inf = avoidance(pressures, t + 1, u)
                a_s, a_i, a_r = forward_step(a_s, a_i, a_r, q, p_inf, beta_r)
                gamma[0, t + 1, u] = a_s
                gamma[1, t + 1, u] = a_i
                gamma[2, t + 1, u] = a_r
            if backward and obs_index[hi] >= 0:
                d_s, d_i, d_r = one_hot(obs_states[obs_index[hi], u])
            else:
                d_s, d_i, d_r = 1.0, 1.0, 1.0
            t = hi
            while t >= lo:
                if t < hi and backward:
                    q, p_inf = avoidance(pressures, t + 1, u)
                    d_s, d_i, d_r = backward_step(d_s, d_i, d_r, q, p_inf, beta_r)
                g_s, g_i, g_r = posterior(gamma[0, t, u], gamma[1, t, u], gamma[2, t, u], d_s, d_i, d_r)
                gamma[0, t, u] = g_s
                gamma[1, t, u] = g_i
                gamma[2, t, u] = g_r
                t -= 1

    return forward_backward_vertex


# ----------------------------------------------------------------------------
# decoding: posteriors (3, T+1, n) -> hitting times (T+1 = never)

# The hitting times of a vertex whose posteriors are not numbers: a normaliser of the
# forward-backward was 0 (0/0), i.e. the rates give its observations probability 0 (an
# infection seen under beta_i = 0, a recovery under beta_r = 0, a vertex still I under
# beta_r = 1, rates so small that every path underflows). Both decoders return it on every
# backend and the projection keeps it, so battus.decode.refuse_undefined sees it whether or not
# the posteriors were kept, instead of a history decoded from NaN.
UNDEFINED = -1


def threshold_vertex_py(gamma, u, tau, with_recovery):
    """First frame with 1 - gamma_S >= tau (infection) and with gamma_R >= tau (recovery);
    (UNDEFINED, UNDEFINED) when a posterior is not a number (see :data:`UNDEFINED`)."""
    n_frames = gamma.shape[1]
    for t in range(n_frames):
        # NaN != NaN: the one sum of each frame carries a NaN of any of its three posteriors
        total = gamma[0, t, u] + gamma[1, t, u] + gamma[2, t, u]
        if total != total:
            return UNDEFINED, UNDEFINED
    ti = n_frames
    tr = n_frames
    for t in range(n_frames):
        if 1.0 - gamma[0, t, u] >= tau:
            ti = t
            break
    if with_recovery:
        for t in range(n_frames):
            if gamma[2, t, u] >= tau:
                tr = t
                break
    return ti, tr


def map_vertex_py(gamma, u, with_recovery):
    """Per-frame arg-max (ties to the lower state), then the cumulative maximum in S < I < R;
    (UNDEFINED, UNDEFINED) when a posterior is not a number (see :data:`UNDEFINED`)."""
    n_frames = gamma.shape[1]
    ti = n_frames
    tr = n_frames
    level = 0
    for t in range(n_frames):
        total = gamma[0, t, u] + gamma[1, t, u] + gamma[2, t, u]
        if total != total:  # NaN: comparisons with it are all false, so the arg-max would say S
            return UNDEFINED, UNDEFINED
        best = 0
        if gamma[1, t, u] > gamma[0, t, u]:
            best = 1
        if with_recovery and gamma[2, t, u] > gamma[best, t, u]:
            best = 2
        if best > level:
            level = best
        if level >= 1 and ti == n_frames:
            ti = t
        if level == 2 and tr == n_frames:
            tr = t
    return ti, tr


def project_vertex_py(obs_times, obs_states, u, ti, tr):
    """Vertex u's hitting times clipped to agree with every observed snapshot; UNDEFINED stays so."""
    if ti == UNDEFINED:
        return ti, tr
    lo_i = 0
    lo_r = 0
    hi_i = 1 << 60
    hi_r = 1 << 60
    for k in range(obs_times.shape[0]):
        t = obs_times[k]
        s = obs_states[k, u]
        if s == 0:
            lo_i = max(lo_i, t + 1)
            lo_r = max(lo_r, t + 1)
        elif s == 1:
            hi_i = min(hi_i, t)
            lo_r = max(lo_r, t + 1)
        else:
            hi_i = min(hi_i, t)
            hi_r = min(hi_r, t)
    ti = min(max(ti, lo_i), hi_i)
    tr = min(max(tr, lo_r), hi_r)
    if tr < ti:
        tr = ti
    return ti, tr


# ----------------------------------------------------------------------------
# simulation (battus.simulate): one synchronous SI/SIR step of one vertex


def sir_step_rule(draw):
    """The step rule over a compiled counter-based draw (:func:`battus.kernels.rng.uniform_py`).

    The draw is a closure variable rather than a global so that each backend
    binds its own compilation of the same function.
    """

    def sir_step_vertex(indptr, indices, current, u, beta_i, beta_r, seed, step, same_step_recovery):
        """Vertex u's state at step+1: each arc from an infected in-neighbour transmits with
        probability beta_i; a vertex infected at the start of the step (or, with
        ``same_step_recovery``, during it) recovers with probability beta_r."""
        s = current[u]
        if s == 2:
            return 2
        infected = s == 1
        if s == 0:
            for e in range(indptr[u], indptr[u + 1]):
                if current[indices[e]] == 1 and draw(seed, STREAM_TRANSMISSION, step, e) < beta_i:
                    infected = True
                    break
        if not infected:
            return 0
        if (s == 1 or same_step_recovery) and draw(seed, STREAM_RECOVERY, step, u) < beta_r:
            return 2
        return 1

    return sir_step_vertex
