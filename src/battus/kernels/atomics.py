"""Atomic fetch-and-add on the CPU for Numba kernels (Numba exposes none for ``prange`` loops).

``atomic_add(array, index, value)`` adds ``value`` to ``array[index]`` (1-D
int64, any stride) as one ``lock xadd`` and returns the previous value, so
threads of a ``prange`` loop can count into shared cells or append to a
shared list. Used where the result does not depend on the order in which
threads arrive (counts, sets of list entries).
"""

from __future__ import annotations

import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _atomic_add(typingctx, array, index, value):
    if not (isinstance(array, types.Array) and array.ndim == 1 and array.dtype == types.int64):
        return None
    sig = types.int64(array, types.intp, types.int64)

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        data, position, amount = args
        view = context.make_array(array_type)(context, builder, data)
        pointer = cgutils.get_item_pointer(context, builder, array_type, view, [position], wraparound=False)
        return builder.atomic_rmw("add", pointer, amount, "monotonic")

    return sig, codegen


def _atomic_add_python(array, index, value):
    old = array[index]
    array[index] += value
    return old


# Under NUMBA_DISABLE_JIT (coverage runs) kernels run as Python, where an intrinsic cannot be called.
atomic_add = _atomic_add_python if numba.config.DISABLE_JIT else _atomic_add
