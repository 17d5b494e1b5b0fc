"""What a full cache costs the process: RSS growth against the budget (issue 27, item 6).

    python bench/cache_rss.py emulate|lng|operator|backward [MiB]     # budget, default 64
    python bench/cache_rss.py operator 0 1080    # the same calls with nothing cached

Warms the API up (compiles), empties the caches, sets the budget, then calls the API on distinct
shapes (every call a new program or plan) until twice the calls that filled the cache, and
prints the RSS growth (/proc/self/statm) against the budget. With a budget of 0 it makes the
given number of calls: the growth the calls' own churn costs, nothing cached. glibc's dynamic
mmap threshold keeps freed multi-core UBs in the heap; MALLOC_MMAP_THRESHOLD_=131072 fixes it
and leaves the caches' share.
"""
import gc
import os
import sys

import numpy as np

import lngb

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def shapes(api):
    cols = (8, 16, 24, 32, 40, 48, 56, 64, 72, 80, 96, 128) if api in ("emulate", "lng") else (
        128, 256, 64, 192, 320)
    return ((1, s, h) for s in range(2, 400) for h in cols)


def call(api, shape):
    dy = np.ones(shape, np.float32)
    b, s, h = shape
    rest = (np.ones((b, s), np.float32), np.zeros((b, s), np.float32), np.ones(h, np.float32))
    if api == "emulate":
        lngb.emulate(dy, dy)
    elif api == "operator":
        lngb.emulate_operator(dy, dy, block_dim=min(8, s))
    elif api == "lng":
        lngb.emulate_layer_norm_grad(dy, dy, *rest)
    else:
        lngb.emulate_layer_norm_backward(dy, dy, *rest, block_dim=min(8, s))


def main(api, budget_mib=64.0, calls=None):
    limit = int(float(budget_mib) * 2**20)
    todo = shapes(api)
    for _ in range(5):
        try:
            call(api, next(todo))
        except lngb.CapacityError:
            pass
    lngb.clear_caches()
    gc.collect()
    lngb.set_cache_limit(limit)
    base, n, full_at = rss(), 0, None
    for shape in todo:
        try:
            call(api, shape)
        except lngb.CapacityError:   # one UB too small for it
            continue
        n += 1
        held = sum(v[1] for k, v in lngb.cache_info().items() if k != "limit")
        if full_at is None and limit and held > 0.9 * limit:
            full_at = n
        if (full_at and n >= 2 * full_at) or (calls and n >= int(calls)):
            break
    gc.collect()
    grow = rss() - base
    held = sum(v[1] for k, v in lngb.cache_info().items() if k != "limit")
    ratio = f" = {grow / limit:.2f}x the budget" if limit else ""
    print(f"{api}: {n} calls (full after {full_at}); counted {held / 2**20:.1f} MiB of "
          f"{limit / 2**20:.0f}; RSS growth {grow / 2**20:.1f} MiB{ratio}")


if __name__ == "__main__":
    main(*sys.argv[1:])
