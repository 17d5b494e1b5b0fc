"""lngb's pytest plugin (entry point `pytest11`, name `lngb`): run a suite's kernels in one mode.

- `--lngb-mode=fast|observed|checked`: the default mode of every core and host call of the run
  that passes no `mode` (it sets $LNGB_MODE); `--lngb-product`: the product of `lngb_core`.
- `@pytest.mark.lngb(product=..., mode=...)`: the same for one test (the marker wins).
- The fixture `lngb_core`: a fresh AICore of the test's product and mode, entered as the current
  core (`with core:`), so mask and sync calls act on it.
- When a test that used `lngb_core` in checked mode fails, its report ends with the core's last
  instructions (the sanitizer's findings are the exception itself).
- lngb's compile notices ("lngb: compiling Add's float loops (first use only, about 1 s)...")
  go to pytest's terminal, output capture or not, so a test that stalls on a cold compile says
  why.
"""
import os
import sys
import threading
from contextlib import nullcontext

import pytest

from .core import MODES, AICore
from .products import PRODUCTS

TAIL = 12   # instructions shown after a failure in checked mode


def pytest_addoption(parser):
    group = parser.getgroup("lngb", "lngb (Ascend vector unit emulator)")
    group.addoption("--lngb-mode", choices=MODES, default=None,
                    help="default mode of every lngb core and call that passes none "
                         "(checked: the sanitizer)")
    group.addoption("--lngb-product", choices=list(PRODUCTS), default=None,
                    help="product of the lngb_core fixture (default atlas-a2)")


_sessions = []   # the configs of the pytest sessions running (nested under pytester)
_terminal = threading.Lock()   # a helper compiled on an operator's core thread: one line at a time


def _show_compile(message):
    """A compile notice, on the terminal of the innermost pytest session, capture suspended."""
    if not _sessions:
        print(message, file=sys.stderr, flush=True)
        return
    config = _sessions[-1]
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")
    with _terminal, capture.global_and_fixture_disabled() if capture else nullcontext():
        if reporter is not None:
            reporter.write_line(message)
        else:
            print(message, file=sys.stderr, flush=True)


def pytest_configure(config):
    from .vector_ops import helpers
    if not _sessions:
        helpers.COMPILE_LISTENERS.append(_show_compile)
    _sessions.append(config)
    config.addinivalue_line("markers", "lngb(product=None, mode=None): the product and mode of "
                                       "this test's lngb_core and of its lngb calls without mode")
    mode = config.getoption("--lngb-mode", default=None)
    if mode is not None:
        config._lngb_previous_mode = os.environ.get("LNGB_MODE")
        os.environ["LNGB_MODE"] = mode


def pytest_unconfigure(config):
    from .vector_ops import helpers
    if config in _sessions:
        _sessions.remove(config)
        if not _sessions and _show_compile in helpers.COMPILE_LISTENERS:
            helpers.COMPILE_LISTENERS.remove(_show_compile)
    if hasattr(config, "_lngb_previous_mode"):
        previous = config._lngb_previous_mode
        if previous is None:
            os.environ.pop("LNGB_MODE", None)
        else:
            os.environ["LNGB_MODE"] = previous


def _marker(item):
    marker = item.get_closest_marker("lngb")
    if marker is None:
        return {}
    unknown = set(marker.kwargs) - {"product", "mode"}
    if marker.args or unknown:
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.lngb takes product= and mode= "
                                f"only, got {marker.args or sorted(unknown)}")
    return marker.kwargs


@pytest.fixture(autouse=True)
def _lngb_marker_mode(request, monkeypatch):
    """A test's @pytest.mark.lngb(mode=...) is the default mode of its lngb calls."""
    mode = _marker(request.node).get("mode")
    if mode is not None:
        if mode not in MODES:
            raise pytest.UsageError(f"@pytest.mark.lngb: mode must be one of {MODES}, got "
                                    f"{mode!r}")
        monkeypatch.setenv("LNGB_MODE", mode)


@pytest.fixture
def lngb_core(request):
    """A fresh AICore of the test's product and mode, entered as the current core."""
    marker = _marker(request.node)
    product = (marker.get("product") or request.config.getoption("--lngb-product", default=None)
               or "atlas-a2")
    core = AICore(product, marker.get("mode"))
    request.node._lngb_core = core
    with core:
        yield core


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    core = getattr(item, "_lngb_core", None)
    if report.failed and core is not None and core.mode == "checked" and core.trace:
        from .observers.trace import format_listing
        report.sections.append((f"lngb: the last instructions of {core!r}",
                                format_listing(core.trace[-TAIL:])))
