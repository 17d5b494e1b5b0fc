"""Clients of the core's retire point: the trace, the sanitizer, the GM checks of multi-core
kernels, the cost model and the debuggers. The trace and the sanitizer are attached to the cores
of the observed and checked modes here."""
from ..core import MODE_OBSERVERS
from .sanitizer import Sanitizer
from .trace import Trace

MODE_OBSERVERS.update(observed=(Trace,), checked=(Trace, Sanitizer))
