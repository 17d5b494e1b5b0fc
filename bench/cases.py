"""The benchmark workloads, shared by the pytest-benchmark suite and `python bench/ratios.py`.

Each case is (name, emulator callable, numpy golden callable) on the same data.
"""
import numpy as np

import lngb
from lngb.vector_ops import Add


def numpy_golden(dy, rfg):
    return (dy * rfg).sum((0, 1)), dy.sum((0, 1))


def _inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.integers(-10, 10, shape).astype(dtype), rng.integers(-10, 10, shape).astype(dtype))


def emulate_case(shape, dtype, product="atlas-a2"):
    dy, rfg = _inputs(shape, dtype)
    return (lambda: lngb.emulate(dy, rfg, product=product)), (lambda: numpy_golden(dy, rfg))


def add_case(n=15360, replayed=False):
    """A contiguous counter-mode Add: three 15 K-float operands (46 K floats), as much as fits
    an A2 UB, against np.add on the same UB arrays. Repeated calls reuse the first one's
    validation; `replayed`: the call recorded once and replayed by `core.run_recorded`."""
    core = lngb.AICore("atlas-a2")
    a, b, c = (core.alloc(n, np.float32) for _ in range(3))
    a.write(np.ones(n, np.float32))
    b.write(np.full(n, 2, np.float32))
    view = core.ub.view(np.float32)
    av, bv, cv = (view[t.address // 4:t.address // 4 + n] for t in (a, b, c))
    call = lambda: Add(c, a, b, n)
    if replayed:
        key = ("bench-add", a.address, b.address, c.address, n)
        return (lambda: core.run_recorded(key, call)), (lambda: np.add(av, bv, out=cv))
    return call, (lambda: np.add(av, bv, out=cv))


OPERATOR_SHAPE = (8, 1024, 4096)
THREADS = 2  # the emulator's threads and torch's, in the same run


def operator_case(shape, dtype, threads=THREADS):
    """emulate_operator on the A2's 48 cores against the numpy golden on the same data."""
    dy, rfg = _inputs(shape, dtype)
    return ((lambda: lngb.emulate_operator(dy, rfg, threads=threads)),
            (lambda: numpy_golden(dy, rfg)))


def torch_case(shape=OPERATOR_SHAPE, threads=THREADS):
    """torch's native_layer_norm_backward, gamma and beta only, from x, mean and rstd (so
    resForGamma is x-hat), on `threads` threads; None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(shape, np.float32))
    dy = torch.from_numpy(rng.standard_normal(shape, np.float32))
    h = shape[-1]
    mean = x.mean(-1, keepdim=True)
    rstd = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + 1e-5)
    weight, bias = torch.ones(h), torch.zeros(h)
    rfg = ((x - mean) * rstd).numpy()
    emulator = lambda: lngb.emulate_operator(dy.numpy(), rfg, threads=threads)
    native = lambda: torch.ops.aten.native_layer_norm_backward(
        dy, x, [h], mean, rstd, weight, bias, [False, True, True])
    return emulator, native


def backward_inputs(shape, dtype, seed=0):
    """dy, x, variance, mean, gamma of a LayerNorm forward."""
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal(shape, np.float32).astype(dtype)
    x = rng.standard_normal(shape, np.float32).astype(dtype)
    mean = x.astype(np.float32).mean(-1).astype(dtype)
    var = x.astype(np.float32).var(-1).astype(dtype)
    return dy, x, var, mean, rng.standard_normal(shape[2], np.float32).astype(dtype)


def numpy_layer_norm_grad(dy, x, var, mean, gamma, eps=1e-5):
    """LayerNormGrad's formulas (spec layernorm_grad.md §2) in numpy, in the input dtype."""
    h = x.shape[-1]
    rstd = (1 / np.sqrt(var + eps))[..., None].astype(x.dtype)
    x2 = x - mean[..., None]
    x1 = dy * gamma
    pd_var = (-0.5 * x1 * x2).sum(-1, keepdims=True) * rstd ** 3
    pd_mean = (-x1 * rstd).sum(-1, keepdims=True) + pd_var * (-2 * x2).sum(-1, keepdims=True) / h
    return x1 * rstd + pd_var * (2 / h) * x2 + pd_mean / h, x2 * rstd


def numpy_backward(dy, x, var, mean, gamma):
    pd_x, rfg = numpy_layer_norm_grad(dy, x, var, mean, gamma)
    return pd_x, rfg, (dy * rfg).sum((0, 1)), dy.sum((0, 1))


def layer_norm_grad_case(shape, dtype, product="atlas-a2"):
    data = backward_inputs(shape, dtype)
    return ((lambda: lngb.emulate_layer_norm_grad(*data, product=product)),
            (lambda: numpy_layer_norm_grad(*data)))


def backward_case(shape, dtype, product="atlas-350", threads=THREADS):
    """emulate_layer_norm_backward on the 950 (CANN's A2 kernel cannot hold a row of 4096
    floats: it rounds rows per chunk up to 8) against numpy on the same data."""
    data = backward_inputs(shape, dtype)
    return ((lambda: lngb.emulate_layer_norm_backward(*data, product=product, threads=threads)),
            (lambda: numpy_backward(*data)))


def torch_backward_case(shape=OPERATOR_SHAPE, threads=THREADS):
    """torch's native_layer_norm_backward with all three outputs, on `threads` threads, against
    emulate_layer_norm_backward on the 950; None when torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    dy, x, var, mean, gamma = backward_inputs(shape, np.float32)
    t = [torch.from_numpy(a) for a in (dy, x, mean[..., None], gamma)]
    rstd = torch.from_numpy((1 / np.sqrt(var + 1e-5))[..., None])
    bias = torch.zeros(shape[2])
    emulator = lambda: lngb.emulate_layer_norm_backward(dy, x, var, mean, gamma,
                                                        product="atlas-350", threads=threads)
    native = lambda: torch.ops.aten.native_layer_norm_backward(
        t[0], t[1], [shape[2]], t[2], rstd, t[3], bias, [True, True, True])
    return emulator, native


SEED = np.arange(64, dtype=np.float32).reshape(1, 8, 8)

CASES = {
    "seed [1,8,8] float": lambda: ((lambda: lngb.emulate(SEED, SEED)),
                                   (lambda: numpy_golden(SEED, SEED))),
    "[4,8,512] float": lambda: emulate_case((4, 8, 512), np.float32),
    "[2,16,64] half": lambda: emulate_case((2, 16, 64), np.float16),
    "largest one-UB [1,181,128] float (a2)": lambda: emulate_case((1, 181, 128), np.float32),
    "largest one-UB [1,181,128] float (a3)": lambda: emulate_case((1, 181, 128), np.float32,
                                                                 "atlas-a3"),
    "largest one-UB [1,246,128] float (310P)": lambda: emulate_case((1, 246, 128), np.float32,
                                                                   "atlas-inference"),
    "largest one-UB [1,246,128] float (350)": lambda: emulate_case((1, 246, 128), np.float32,
                                                                  "atlas-350"),
    "Add 3 x 15360 floats, repeated call": add_case,
    "operator [8,1024,4096] float, 2 threads": lambda: operator_case(OPERATOR_SHAPE, np.float32),
    "operator [8,1024,4096] half, 2 threads": lambda: operator_case(OPERATOR_SHAPE, np.float16),
    "Add 3 x 15360 floats, replayed": lambda: add_case(replayed=True),
    "layer-norm-grad [1,8,512] float (a2)": lambda: layer_norm_grad_case((1, 8, 512), np.float32),
    "layer-norm-grad [1,16,64] half (a2)": lambda: layer_norm_grad_case((1, 16, 64), np.float16),
    "backward [8,1024,4096] float (350), 2 threads": lambda: backward_case(OPERATOR_SHAPE,
                                                                          np.float32),
    "backward [8,1024,4096] half (350), 2 threads": lambda: backward_case(OPERATOR_SHAPE,
                                                                         np.float16),
}
