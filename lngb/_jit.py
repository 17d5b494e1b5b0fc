"""The one Numba shim: every jitted function in lngb is declared through `njit`.

fastmath stays off (reassociation would change the device's order of additions),
results are cached on disk so a warm process starts fast, and kernels release the GIL.
"""
import numba
import numpy as np

JIT_OPTIONS = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")


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

if numba.config.DISABLE_JIT:
    def prefetch(array, offset):
        """No-op in pure Python."""

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
