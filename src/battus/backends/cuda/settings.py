"""The CUDA backend's tuning numbers, in one frozen object.

None of them changes a value: they decide how the work is cut into blocks,
bins and work items, never what is computed or in which order a sum adds.
A fitting worker process gets them as a dict (:meth:`CUDASettings.as_dict`)
and rebuilds them (:meth:`CUDASettings.from_dict`), so every device of a fit
cuts its work the same way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

from ...kernels.cuda_common import WARP
from ...kernels.fit_cuda import NARROW


@dataclass(frozen=True)
class CUDASettings:
    """Where the CUDA backend sends its work; the defaults are the production values.

    ``benchmarks/gpu_scale.py --sweep`` sweeps the degree bins and
    ``benchmarks/gpu_fit.py --variant`` takes any of these; the tests lower
    the bins and ``item_arcs`` so that a graph of 30 vertices runs every
    kernel path (thread, warp and hub bins, split work items).
    """

    # Mean-field pressure gathers (battus.kernels.infer_cuda.pressure_binned): a vertex of in-degree
    # below warp_min_degree is one thread's, below hub_min_degree one warp's (a warp reads a row of 32
    # arcs coalesced, wasted on shorter rows); a larger one is cut into chunks of hub_chunk arcs, one
    # block each, whose float64 partial sums finish_hubs adds in chunk order.
    warp_min_degree: int = 32
    hub_min_degree: int = 1024
    hub_chunk: int = 2048
    # Fitting work items: a vertex's in-arcs in ranges of at most item_arcs arcs, so that a hub's
    # arcs spread over many warps; a vertex of several ranges is summed from float64 partials.
    item_arcs: int = 1024
    # Group width of the float64 passes of at most POLISH candidates (the re-score): NARROW lanes
    # (8 on a GPU: 64-byte rows) rather than WARP (256-byte rows, most of them idle lanes).
    narrow_lanes: int = NARROW
    # A group-pair step takes two lanes per thread (fit_cuda.batch_pressure_pair_two_lanes) on
    # graphs of at most this many arcs per work item on average, where a warp of one work item waits
    # on its reads; on longer items one lane per thread is faster. 0 never. Warm-up forces each
    # kernel in turn, so that neither compiles inside a timed fit.
    two_lane_max_arcs: float = 32.0

    def __post_init__(self) -> None:
        for name in ("warp_min_degree", "hub_min_degree", "hub_chunk", "item_arcs", "narrow_lanes"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)!r}")
        if WARP % int(self.narrow_lanes):
            raise ValueError(f"narrow_lanes must divide {WARP}, got {self.narrow_lanes!r}")
        if not float(self.two_lane_max_arcs) >= 0.0:
            raise ValueError(f"two_lane_max_arcs must be >= 0, got {self.two_lane_max_arcs!r}")

    def as_dict(self) -> dict:
        """The settings as plain JSON values (a worker's start request carries them)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> CUDASettings:
        """The settings :meth:`as_dict` gave; an unknown key is an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown CUDA settings {unknown}")
        return cls(**values)
