"""The one Numba shim: every jitted function in lngb is declared through `njit`.

fastmath stays off (reassociation would change the device's order of additions),
results are cached on disk so a warm process starts fast, and kernels release the GIL.
"""
import numba

JIT_OPTIONS = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")


def njit(func=None, **overrides):
    options = {**JIT_OPTIONS, **overrides}
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)
