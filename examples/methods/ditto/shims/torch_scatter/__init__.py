"""The part of torch_scatter that DITTO calls, on PyTorch's own scatter_reduce.

DITTO pins torch-scatter 2.0.7, which has no wheel for current PyTorch; run_ditto.py puts this
folder at the end of sys.path, so a real torch_scatter, when installed, wins. Semantics follow
torch_scatter's: the index is broadcast along the trailing dimensions of ``src``, and an output
position that receives nothing keeps the reduction's identity (0 for sum, mean, max and min as
torch_scatter returns them; 1 for mul). ``scatter_max``/``scatter_min`` and ``segment_min_csr``
return ``(values, None)``: DITTO reads only the values.
"""

from __future__ import annotations

import torch


def _broadcast(index: torch.Tensor, src: torch.Tensor, dim: int) -> torch.Tensor:
    dim = dim % src.dim()
    if index.dim() == 1:
        index = index.view(*([1] * dim), -1, *([1] * (src.dim() - dim - 1)))
    return index.expand_as(src)


def _scatter(src, index, dim, dim_size, reduce, fill):
    dim = dim % src.dim()
    index = _broadcast(index, src, dim)
    size = list(src.shape)
    size[dim] = int(index.max()) + 1 if dim_size is None else int(dim_size)
    out = torch.full(size, fill, dtype=src.dtype, device=src.device)
    return out.scatter_reduce(dim, index, src, reduce=reduce, include_self=False)


def scatter_sum(src, index, dim=-1, out=None, dim_size=None):
    return _scatter(src, index, dim, dim_size, "sum", 0)


def scatter_mean(src, index, dim=-1, out=None, dim_size=None):
    return _scatter(src, index, dim, dim_size, "mean", 0)


def scatter_mul(src, index, dim=-1, out=None, dim_size=None):
    return _scatter(src, index, dim, dim_size, "prod", 1)


def scatter_max(src, index, dim=-1, out=None, dim_size=None):
    return _scatter(src, index, dim, dim_size, "amax", 0), None


def scatter_min(src, index, dim=-1, out=None, dim_size=None):
    return _scatter(src, index, dim, dim_size, "amin", 0), None


def segment_min_csr(src, indptr, out=None):
    """Minimum of each segment src[indptr[i]:indptr[i+1]] (DITTO's segments are never empty).

    On scatter_reduce rather than torch.segment_reduce, which has no CUDA kernel for integers.
    """
    lengths = indptr.diff()
    segment = torch.repeat_interleave(torch.arange(len(lengths), device=src.device), lengths)
    return _scatter(src, segment, 0, len(lengths), "amin", 0), None
