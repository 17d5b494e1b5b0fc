"""Print the emulator / numpy-golden time ratios (medians), as bench/HISTORY.md quotes them.

    python bench/ratios.py
"""
import pathlib
import subprocess
import sys
import time
import timeit

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from cases import CASES, torch_backward_case, torch_case  # noqa: E402
from test_bench import COLD_START, warm_caches  # noqa: E402


def median_us(func, repeat=15):
    return medians_us(func, repeat=repeat)[0]


def medians_us(*funcs, repeat=15):
    """Each function's median time a call (µs), over `repeat` rounds of ~20 ms each, the
    functions' rounds alternating: the host's speed drifts by up to 2x within minutes
    (bench/HISTORY.md), and alternating puts the drift on every function alike, where timing one
    function's rounds and then the other's put it on their ratio."""
    numbers = []
    for func in funcs:
        func()
        numbers.append(max(1, int(0.02 / max(timeit.timeit(func, number=1), 1e-7))))
    runs = [[] for _ in funcs]
    for _ in range(repeat):
        for func, number, times in zip(funcs, numbers, runs):
            times.append(timeit.timeit(func, number=number) / number * 1e6)
    return [sorted(times)[repeat // 2] for times in runs]


def main():
    print(f"{'case':42} {'emulator us':>12} {'numpy us':>10} {'ratio':>7}")
    for name, make in CASES.items():
        emulator, golden = make()
        e, g = medians_us(emulator, golden)
        print(f"{name:42} {e:12.1f} {g:10.1f} {e / g:7.2f}")
    warm_caches()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", COLD_START], check=True)
        times.append(time.perf_counter() - start)
    print(f"cold start (warm Numba and bytecode caches), median of 5: {sorted(times)[2]:.2f} s")
    import numpy as np
    import lngb
    x = np.random.default_rng(0).standard_normal((4, 8, 512)).astype(np.float32)
    times = {mode: median_us(lambda mode=mode: lngb.emulate(x, x, mode=mode))
             for mode in ("fast", "observed", "checked")}
    records = len(lngb.emulate(x, x, mode="observed").core.trace)
    print(f"[4,8,512] float: fast {times['fast']:.1f} us, checked {times['checked']:.1f} us "
          f"({times['checked'] / times['fast']:.1f}x fast), observed {times['observed']:.0f} us "
          f"= {times['observed'] / records:.1f} us per instruction or event ({records})")
    y = np.random.default_rng(0).standard_normal((8, 64, 256)).astype(np.float32)
    fast, checked = medians_us(lambda: lngb.emulate_operator(y, y),
                               lambda: lngb.emulate_operator(y, y, mode="checked"), repeat=7)
    print(f"operator [8,64,256] float, 48 cores: fast {fast:.0f} us, checked {checked:.0f} us "
          f"({checked / fast:.1f}x fast, the check reused)")
    lngb.clear_caches()
    start = time.perf_counter()
    rows = lngb.sweep([(4, 8, 512)], ["float32"], ["atlas-a2"])
    print(f"sweep of {len(rows)} temp sizes, [4,8,512] float, programs not cached: "
          f"{time.perf_counter() - start:.2f} s")
    # torch last, so that nothing else is timed beside the thread pool it starts
    case = torch_case()
    if case is None:
        print("torch not installed: no torch comparison (pip install torch==2.13.0)")
    else:
        e, t = medians_us(*case, repeat=7)
        print(f"{'operator [8,1024,4096] float vs torch':42} {e:12.1f} {t:10.1f} {e / t:7.2f}"
              "  (torch native_layer_norm_backward, 2 threads)")
        emulator, native = torch_backward_case()
        e, t = medians_us(emulator, native, repeat=5)
        print(f"{'backward [8,1024,4096] float vs torch':42} {e:12.1f} {t:10.1f} {e / t:7.2f}"
              "  (all three outputs; the emulator on atlas-350)")


if __name__ == "__main__":
    main()
