"""This checkout's benchmark cases against whichever lngb is imported, for comparing versions:
run it once per version, each from its own checkout on PYTHONPATH, in interleaved rounds.

    git worktree add /tmp/old <commit>
    PYTHONPATH=/tmp/old python bench/versions.py            # every case
    PYTHONPATH=/tmp/old python bench/versions.py "[4,8,512] float"

Prints each case's emulator and numpy-golden medians (µs, timed as bench/ratios.py times them)
and their ratio; a case the imported lngb cannot run (an API it does not have yet) prints as
such.
"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from cases import CASES  # noqa: E402
from ratios import medians_us  # noqa: E402

import lngb  # noqa: E402


def main(names):
    print(f"lngb from {pathlib.Path(lngb.__file__).parent}")
    for name in names or CASES:
        try:
            emulator, golden = CASES[name]()
            emulator()
            golden()
        except Exception as error:   # noqa: BLE001 - an older lngb lacks the API
            print(f"{name:48} cannot run: {type(error).__name__}: {error}")
            continue
        e, g = medians_us(emulator, golden)
        print(f"{name:48} {e:12.1f} {g:12.1f} {e / g:7.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
