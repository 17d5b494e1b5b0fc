"""The one Numba shim: every jitted function in lngb is declared through `njit`.

fastmath stays off (reassociation would change the device's order of additions),
results are cached on disk so a warm process starts fast, and kernels release the GIL.
"""
import numba
import numpy as np

from .disk_cache import install_locator

JIT_OPTIONS = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")
install_locator()   # before anything is jitted: lngb's functions are cached in lngb's directory


def njit(func=None, **overrides):
    options = {**JIT_OPTIONS, **overrides}
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


def host_converts_half():
    """Whether numba compiles for a CPU that converts half <-> float in hardware (x86's F16C,
    every AArch64), so that LLVM's fpext / fptrunc of `half` become instructions: for a CPU
    without them they become library calls that numba's JIT cannot link (a segfault)."""
    import platform

    from llvmlite import binding
    if numba.config.CPU_NAME not in (None, "host"):   # NUMBA_CPU_NAME: code for another CPU
        return False
    if platform.machine().lower() in ("aarch64", "arm64"):
        return True
    if numba.config.CPU_FEATURES is not None:          # NUMBA_CPU_FEATURES
        return "+f16c" in numba.config.CPU_FEATURES.split(",")
    try:
        return bool(binding.get_host_cpu_features().get("f16c", False))
    except Exception:   # features unknown: the integer conversions
        return False


# numba's disk cache keys compiled code on the CPU's features, which decide this too, so a cache
# never holds code compiled for the other choice
HARDWARE_HALF = not numba.config.DISABLE_JIT and host_converts_half()

# The executor calls each instruction's loops and each kernel family out of line, through a
# table of helpers (vector_ops.helpers): C functions, compiled or loaded from the disk cache the
# first time a program needs them, of one of two signatures. Compiled, a helper is the C
# function's address (an int64 of the table) and an array goes as a pointer (the UB with its
# size); in pure Python it is the Python function, called with the arrays.
# - A row helper (a family: the lane walk, reductions, ...), call_row(helper, ub, rows, i, cores,
#   scratch, flags, lane): ub the block of `cores` interleaved UBs (uint8), rows[i] the row it
#   runs, scratch and flags the work space of 256 float32 and 256 bool, lane the lane helper an
#   element-wise row's walk calls (0 for the others).
# - A lane helper (what one lane of an instruction computes), call_lane(helper, a, b, s) -> fp32.
# - A run helper (an instruction's contiguous loops), call_run(helper, ub, d, a, b, s, n, runs,
#   dstep, sstep, dt, sat): runs of n lanes (vector_ops.loops), given the UB as float32 and
#   uint16 pointers (its views, made once by the caller: made per call, they cost a short row
#   several ns).
_t = numba.types
ROW_HELPER = _t.void(_t.CPointer(_t.uint8), _t.int64, _t.CPointer(_t.int64), _t.int64,
                     _t.CPointer(_t.float32), _t.CPointer(_t.boolean), _t.int64)
LANE_HELPER = _t.float32(_t.float32, _t.float32, _t.float32)
RUN_HELPER = _t.void(_t.CPointer(_t.float32), _t.CPointer(_t.uint16), _t.int64, _t.int64,
                     _t.int64, _t.int64, _t.float32, *[_t.int64] * 6)


def c_helper(entry, signature):
    """The C function (a numba.cfunc, cached on disk) of a helper's entry point: a module-level
    function of pointers that calls its body with carrays (see vector_ops.loops)."""
    options = {k: v for k, v in JIT_OPTIONS.items() if k != "nogil"}
    return numba.cfunc(signature, **options)(entry)


if numba.config.DISABLE_JIT:
    def prefetch(array, offset):
        """No-op in pure Python."""

    # IEEE arithmetic on inf and NaN, as compiled code does it: numpy's warnings are silenced
    def call_row(helper, ub, rows, i, cores, scratch, flags, lane):
        with np.errstate(all="ignore"):
            helper(ub, rows[i], cores, scratch, flags, lane)

    def call_lane(helper, a, b, s):
        return helper(a, b, s)

    def call_run(helper, ub, *scalars):
        with np.errstate(all="ignore"):
            helper(ub.view(np.float32), ub.view(np.uint16), *scalars)

    def half_bits_to_float(bits):
        return np.float32(np.uint16(int(bits) & 0xFFFF).view(np.float16))

    def float_to_half_bits(value):
        with np.errstate(over="ignore"):
            return np.float16(np.float32(value)).view(np.uint16)
else:
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    @intrinsic
    def prefetch(typingctx, array, offset):
        """Hint the CPU to fetch array[offset]'s cache line into L2 (llvm.prefetch, read,
        locality 2). Fetching into L1 as well gained nothing on the Zen 4 host the bench ran
        on: those prefetches hold the L1 miss buffers the DataCopys' own loads need."""
        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, args[0]).data
            pointer = builder.gep(data, [args[1]])
            i32 = ir.IntType(32)
            function = cgutils.get_or_insert_function(
                builder.module, ir.FunctionType(ir.VoidType(), [pointer.type, i32, i32, i32]),
                "llvm.prefetch.p0")
            builder.call(function, [pointer, i32(0), i32(2), i32(1)])
            return context.get_dummy_value()
        return types.void(array, types.intp), codegen

    def _call(context, builder, signature, address, arguments):
        c_types = [context.get_value_type(t) for t in signature.args]
        result = (ir.VoidType() if signature.return_type == types.void
                  else context.get_value_type(signature.return_type))
        function = builder.inttoptr(address, ir.FunctionType(result, c_types).as_pointer())
        return builder.call(function, [builder.bitcast(a, t) if a.type != t else a
                                       for a, t in zip(arguments, c_types)])

    @intrinsic
    def call_row(typingctx, address, ub, rows, i, cores, scratch, flags, lane):
        """Call the row helper at `address` (ROW_HELPER) on row i of rows."""
        def codegen(context, builder, signature, args):
            ub_, rows_, scratch_, flags_ = [
                context.make_array(signature.args[k])(context, builder, args[k])
                for k in (1, 2, 5, 6)]
            row = builder.gep(rows_.data, [builder.mul(args[3],
                                                       builder.extract_value(rows_.shape, 1))])
            _call(context, builder, ROW_HELPER, args[0],
                  [ub_.data, ub_.nitems, row, args[4], scratch_.data, flags_.data,
                   context.cast(builder, args[7], signature.args[7], types.int64)])
            return context.get_dummy_value()
        return types.void(address, ub, rows, i, cores, scratch, flags, lane), codegen

    @intrinsic
    def call_lane(typingctx, address, a, b, s):
        """Call the lane helper at `address` (LANE_HELPER)."""
        def codegen(context, builder, signature, args):
            values = [context.cast(builder, v, t, types.float32)
                      for v, t in zip(args[1:], signature.args[1:])]
            return _call(context, builder, LANE_HELPER, args[0], values)
        return types.float32(address, a, b, s), codegen

    @intrinsic
    def call_run(typingctx, address, ub, d, a, b, s, n, runs, dstep, sstep, dt, sat):
        """Call the run helper at `address` (RUN_HELPER)."""
        def codegen(context, builder, signature, args):
            ub_ = context.make_array(signature.args[1])(context, builder, args[1])
            scalars = [context.cast(builder, value, given, wanted) for value, given, wanted
                       in zip(args[2:], signature.args[2:], RUN_HELPER.args[3:])]
            _call(context, builder, RUN_HELPER, args[0],
                  [ub_.data, ub_.data, ub_.nitems, *scalars])
            return context.get_dummy_value()
        return types.void(address, ub, d, a, b, s, n, runs, dstep, sstep, dt, sat), codegen

    @intrinsic
    def half_bits_to_float(typingctx, bits):
        """The float32 value of half bit pattern `bits` (an unsigned integer; its low 16 bits),
        by LLVM's fpext: the CPU's conversion (HARDWARE_HALF), which quiets signalling NaNs."""
        def codegen(context, builder, signature, args):
            value = args[0]
            if value.type.width != 16:
                value = builder.trunc(value, ir.IntType(16))
            return builder.fpext(builder.bitcast(value, ir.HalfType()), ir.FloatType())
        return types.float32(bits), codegen

    @intrinsic
    def float_to_half_bits(typingctx, value):
        """The half bit pattern of float32 `value` rounded to nearest, ties to even, by LLVM's
        fptrunc: the CPU's conversion (HARDWARE_HALF; overflow is inf, a NaN is quieted)."""
        def codegen(context, builder, signature, args):
            return builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
        return types.uint16(types.float32), codegen
