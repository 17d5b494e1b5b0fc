"""Shared fixtures and helpers for the lngb tests (the oracles live in tests/naive.py).

A module (``pytestmark = pytest.mark.jitted``) or test that runs lngb's jitted code carries the
`jitted` marker (pyproject.toml): with NUMBA_DISABLE_JIT=1 only those run other code than under
the JIT, so the pure-Python run is ``NUMBA_DISABLE_JIT=1 pytest -m jitted``. A test of host code
alone (tilings, the oracles, argument checks) needs no marker."""
import zlib

import numpy as np
import pytest

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
EXEC_MODES = ("fast", "observed", "checked")
# the paths without the sanitizer, for a test whose instruction sequence it rejects on purpose
UNCHECKED_MODES = ("fast", "observed")


@pytest.fixture(autouse=True)
def fresh_caches_around_patches(request):
    """A test that patches lngb's code plans and records its kernels afresh, and leaves no
    programs or plans of the patched code to later tests: lngb's own kernels are keyed by their
    configuration, not by their code."""
    if "monkeypatch" not in request.fixturenames:
        yield
        return
    import lngb
    lngb.clear_caches()
    yield
    lngb.clear_caches()


@pytest.fixture(params=EXEC_MODES)
def mode(request):
    """Every golden row runs on every execution path ("fast"; "observed": a trace; "checked": a
    trace and the sanitizer); all must give the oracle's bytes."""
    return request.param


def seed_of(*parts):
    """A stable per-case seed (independent of PYTHONHASHSEED)."""
    return zlib.crc32("/".join(map(str, parts)).encode())


def garbage_ub(core, rng):
    """Random bytes over the whole UB (and the vector registers after it), so that lanes an
    instruction must leave alone are visibly left alone, whatever their bit pattern."""
    core.ub[:] = rng.integers(0, 256, size=core.ub.size, dtype=np.uint8)
    core.host_write(0, core.ub.size)  # "checked": the host initialised these bytes


def random_finite(dtype, n, rng):
    """n finite values of `dtype`: mostly moderate normals (so sums and products round), plus
    ~15% arbitrary finite bit patterns (subnormals, huge and tiny magnitudes, -0.0)."""
    dtype = np.dtype(dtype)
    with np.errstate(all="ignore"):
        vals = (rng.standard_normal(n) * 2.0 ** rng.integers(-6, 7, size=n)).astype(dtype)
    uint = np.uint16 if dtype == F16 else np.uint32
    exp_mask = 0x7C00 if dtype == F16 else 0x7F800000
    bits = rng.integers(0, np.iinfo(uint).max, size=n, dtype=uint, endpoint=True)
    finite = (bits & exp_mask) != exp_mask
    pick = (rng.random(n) < 0.15) & finite
    vals[pick] = bits[pick].view(dtype)
    return vals


def fill_random(core, tensor, rng, n=None):
    """Write random finite values into the first n (default: all) elements of `tensor`."""
    n = tensor.size if n is None else n
    vals = random_finite(tensor.dtype, n, rng)
    tensor.write(vals)
    return vals


def put(tensor, values, at=0):
    """Host-write `values` (converted to the tensor's dtype) from element `at` of `tensor`."""
    with np.errstate(all="ignore"):
        values = np.asarray(values, dtype=tensor.dtype)
    tensor[at].write(values)


def rejected(error, call, core):
    """Run `call`, expect `error`, and check that the core's UB did not change; the message."""
    before = core.ub.copy()
    with pytest.raises(error) as info:
        call()
    assert np.array_equal(core.ub, before), "a rejected call changed the UB"
    return str(info.value)
