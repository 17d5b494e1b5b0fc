"""The one Numba shim: every jitted function in lngb is declared through `njit`.

fastmath stays off (reassociation would change the device's order of additions),
results are cached on disk so a warm process starts fast, and kernels release the GIL.
"""
import numba

JIT_OPTIONS = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")


def njit(func=None, **overrides):
    options = {**JIT_OPTIONS, **overrides}
    if func is None:
        return lambda f: numba.njit(**options)(f)
    return numba.njit(**options)(func)


if numba.config.DISABLE_JIT:
    def prefetch(array, offset):
        """No-op in pure Python."""
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

