"""emulate_operator against a float64 oracle: the error bound of its order of additions and the
error measured; emulate_layer_norm_backward against PyTorch's closed form in float64: the error
measured against the tests' tolerance (docs/api/backward.md, "Accuracy").

    python bench/accuracy.py [B S H]            (default 8 1024 4096)
    python bench/accuracy.py --backward [B S H] (default 4 64 256)
"""
import sys

import numpy as np

import lngb

U32, UH, HALF_TINY = 2.0 ** -24, 2.0 ** -11, 2.0 ** -25


def gamma(k, u=U32):
    return k * u / (1 - k * u)


def depth(tiling):
    """Additions on a column's longest path: rows in a tile, tiles in a core, cores."""
    tiles = max(-(-n // tiling.tile_rows) for _, n in tiling.core_rows)
    return (tiling.tile_rows - 1) + (tiles - 1) + (tiling.block_dim - 1), tiles


def bounds(tiling, dtype, abs_terms, exact):
    """Per-column bound on |result - exact| for a sum of terms with sum |terms| = abs_terms.

    float: every term is rounded once (the product) and goes through at most d additions:
        |err| <= gamma(d + 1) * sum|terms|.
    half: products of halves are exact in fp32; each tile partial is rounded to half once
    (relative 2**-11, or 2**-25 absolute near underflow), the fp32 additions add gamma(d), and
    the result is rounded to half once more:
        |err| <= uh*|exact| + 2**-25 + (1 + uh) * ((uh + gamma(d)) * (1 + gamma(d)) * sum|terms|
                                                    + tiles_total * 2**-25)."""
    d, _ = depth(tiling)
    if dtype == np.float32:
        return gamma(d + 1) * abs_terms
    tiles_total = sum(-(-n // tiling.tile_rows) for _, n in tiling.core_rows)
    g = gamma(d)
    return (UH * np.abs(exact) + HALF_TINY
            + (1 + UH) * ((UH + g) * (1 + g) * abs_terms + tiles_total * HALF_TINY))


def measure(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal(shape).astype(dtype)
    rfg = rng.standard_normal(shape).astype(dtype)
    result = lngb.emulate_operator(dy, rfg)
    d64, r64 = dy.reshape(-1, shape[2]).astype(np.float64), rfg.reshape(-1, shape[2]).astype(np.float64)
    rows = []
    for name, got, terms in (("pd_gamma", result.pd_gamma, d64 * r64),
                             ("pd_beta", result.pd_beta, d64)):
        exact, abs_terms = terms.sum(0), np.abs(terms).sum(0)
        err = np.abs(got.astype(np.float64) - exact)
        bound = bounds(result.tiling, dtype, abs_terms, exact)
        rows.append((name, float((err / abs_terms).max()), float((bound / abs_terms).max()),
                     float((err / bound).max())))
    return result.tiling, rows


def float64_backward(dy, x, variance, mean, gamma, epsilon):
    """PyTorch's native_layer_norm_backward in float64, rstd = 1/sqrt(variance + epsilon):
    (grad_input, x_hat, grad_weight, grad_bias)."""
    eps = float(np.asarray(epsilon, dtype=dy.dtype))
    dy, x, g = (a.astype(np.float64) for a in (dy, x, gamma))
    rstd = 1.0 / np.sqrt(variance.astype(np.float64)[..., None] + eps)
    x_hat = (x - mean.astype(np.float64)[..., None]) * rstd
    g_dy, h = dy * g, x.shape[-1]
    grad_input = rstd / h * (h * g_dy - g_dy.sum(-1, keepdims=True)
                             - x_hat * (g_dy * x_hat).sum(-1, keepdims=True))
    return grad_input, x_hat, (dy * x_hat).sum((0, 1)), dy.sum((0, 1))


# docs/api/backward.md, "Accuracy": pdX error <= row_max * max|pdX of the row| + elem * |pdX|; resForGamma
# relative error <= rfg (spec layernorm_grad.md §7.4)
TOLERANCE = {np.float32: (1e-5, 1e-5, 1e-6), np.float16: (2e-3, 1e-3, 1e-3)}


def backward(shape):
    print(f"[{', '.join(map(str, shape))}], uniform(-100, 100) dy and x, gamma uniform(-2, 2), "
          "mean/variance of x, epsilon 1e-5")
    print(f"{'product':16} {'dtype':8} {'pdX err/tolerance':>18} {'pdX err/row max':>16} "
          f"{'rfg rel err':>12} {'pdGamma rel':>12} {'pdBeta rel':>11}")
    rng = np.random.default_rng(0)
    for product in ("atlas-a2", "atlas-350"):
        for dtype in (np.float32, np.float16):
            dy = rng.uniform(-100, 100, shape).astype(dtype)
            x = rng.uniform(-100, 100, shape).astype(dtype)
            mean = x.astype(np.float32).mean(-1).astype(dtype)
            var = x.astype(np.float32).var(-1).astype(dtype)
            gamma = rng.uniform(-2, 2, shape[2]).astype(dtype)
            r = lngb.emulate_layer_norm_backward(dy, x, var, mean, gamma, product=product)
            ref_x, ref_hat, ref_g, ref_b = float64_backward(dy, x, var, mean, gamma, 1e-5)
            row_max, elem, _ = TOLERANCE[dtype]
            row = np.abs(ref_x).max(-1, keepdims=True)
            err = np.abs(r.pd_x.astype(np.float64) - ref_x)
            rfg = lngb.emulate_layer_norm_grad(dy[:1, :8], x[:1, :8], var[:1, :8], mean[:1, :8],
                                               gamma, product=product).res_for_gamma
            rfg_err = np.abs(rfg - ref_hat[:1, :8]) / np.maximum(np.abs(ref_hat[:1, :8]), 1e-30)
            rel = lambda got, ref: float(np.abs(got.astype(np.float64) - ref).max()
                                         / np.abs(ref).max())
            print(f"{product:16} {np.dtype(dtype).name:8} "
                  f"{float((err / (row_max * row + elem * np.abs(ref_x))).max()):18.3f} "
                  f"{float((err / row).max()):16.3e} {float(rfg_err.max()):12.3e} "
                  f"{rel(r.pd_gamma, ref_g):12.3e} {rel(r.pd_beta, ref_b):11.3e}")


def main():
    if sys.argv[1:2] == ["--backward"]:
        args = sys.argv[2:5]
        backward(tuple(int(a) for a in args) if len(args) == 3 else (4, 64, 256))
        return
    shape = tuple(int(a) for a in sys.argv[1:4]) if len(sys.argv) >= 4 else (8, 1024, 4096)
    print(f"[{', '.join(map(str, shape))}], standard normal dy and resForGamma, atlas-a2")
    print(f"{'dtype':8} {'output':9} {'max err/sum|t|':>15} {'bound/sum|t|':>13} "
          f"{'max err/bound':>14}")
    for dtype in (np.float32, np.float16):
        tiling, rows = measure(shape, dtype)
        for name, err, bound, used in rows:
            print(f"{np.dtype(dtype).name:8} {name:9} {err:15.3e} {bound:13.3e} {used:14.3f}")
        d, tiles = depth(tiling)
        print(f"{'':8} (block_dim {tiling.block_dim}, tiles of {tiling.tile_rows} rows x "
              f"{tiling.tile_cols} columns, {tiles} tiles per core, depth {d})")


if __name__ == "__main__":
    main()
