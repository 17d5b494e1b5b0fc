"""emulate_operator against a float64 oracle: the error bound of its order of additions and the
error measured (README, "Accuracy").

    python bench/accuracy.py [B S H]        (default 8 1024 4096)
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


def main():
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
