"""The one-core sample kernels of `lngb.emulate` and `lngb.emulate_layer_norm_grad`."""
import numpy as np

from ..tensor import GlobalTensor, current_core
from ..vector_ops import DataCopy, HardEvent, SetFlag, WaitFlag
from .layer_norm_grad import LayerNormGrad
from .layer_norm_grad_beta import LayerNormGradBeta
from .pipe import TPipe


class SampleKernel:
    """CANN's sample kernel around LayerNormGradBeta, written as a user writes one for
    `lngb.simulate_kernel`: `kernel(inputDy, resForGamma, outputPdGamma, outputPdBeta)` with a
    GlobalTensor each, on the current core. DataCopy GM -> UB of inputDy and resForGamma,
    LayerNormGradBeta, DataCopy UB -> GM of the outputs, with the MTE2 -> V and V -> MTE3 events
    a TQue-based kernel emits between them. `tensors` names its LocalTensors once it has run (or
    been recorded)."""

    def __init__(self, shape, dtype, tmp_bytes, tiling, is_reuse_source=False,
                 reuse_buffer="input_dy"):
        self.shape, self.dtype = shape, np.dtype(dtype)
        self.tmp_bytes, self.tiling = tmp_bytes, tiling
        self.reuse = (is_reuse_source, reuse_buffer)
        self.tensors = {}

    def __call__(self, gm_dy, gm_rfg, gm_g, gm_b):
        core, dtype, (b, s, h) = current_core(), self.dtype, self.shape
        dy = core.alloc(self.shape, dtype, "VECIN")
        rfg = core.alloc(self.shape, dtype, "VECIN")
        out_g = core.alloc(h, dtype, "VECOUT")
        out_b = core.alloc(h, dtype, "VECOUT")
        tmp = core.alloc(self.tmp_bytes, np.uint8, "VECCALC")
        self.tensors.update(inputDy=dy, resForGamma=rfg, outputPdGamma=out_g, outputPdBeta=out_b,
                            sharedTmpBuffer=tmp)
        DataCopy(dy, gm_dy, b * s * h)
        DataCopy(rfg, gm_rfg, b * s * h)
        SetFlag(HardEvent.MTE2_V, 0)
        WaitFlag(HardEvent.MTE2_V, 0)
        LayerNormGradBeta(out_g, out_b, rfg, dy, tmp, self.tiling,
                          is_reuse_source=self.reuse[0], reuse_buffer=self.reuse[1])
        SetFlag(HardEvent.V_MTE3, 0)
        WaitFlag(HardEvent.V_MTE3, 0)
        DataCopy(gm_g, out_g, h)
        DataCopy(gm_b, out_b, h)

    def cache_key(self):
        """Everything its instruction stream depends on (simulate_kernel's replay key)."""
        from ..runtime.cache import exact   # here: the kernel's line numbers are documented
        return exact((tuple(self.shape), self.dtype, self.tmp_bytes, self.tiling, self.reuse))


def padded(nbytes):
    """Bytes rounded up to whole 32-byte blocks (what a DataCopy moves)."""
    return -(-nbytes // 32) * 32


class LayerNormGradSampleKernel:
    """The kernel around LayerNormGrad that `lngb.emulate_layer_norm_grad` runs on one core:
    DataCopy GM -> UB of dy, x, variance, mean and gamma, LayerNormGrad, DataCopy UB -> GM of
    pdX and resForGamma, with the events between, on a TPipe of its own (LayerNormGrad fetches
    the event id of its scalar broadcast from it, as on the device). The data tensors are
    allocated first and the temp buffer last, so a kernel overrun of it (spec layernorm_grad.md
    §3.5) lands in free UB.
    GM slots: dy, x, (variance | mean | gamma) and (pdX | resForGamma), each part padded to 32
    bytes."""

    def __init__(self, core, shape, dtype, tmp_bytes, tiling, gms, epsilon, is_reuse_source):
        self.core, self.shape, self.dtype = core, shape, np.dtype(dtype)
        self.tmp_bytes, self.tiling, self.gms = tmp_bytes, tiling, gms
        self.epsilon, self.reuse = epsilon, is_reuse_source
        self.tensors = {}

    @staticmethod
    def layout(shape, dtype):
        """Byte offsets of variance, mean, gamma in the parameter slot and of pdX, resForGamma in
        the output slot, and the two slots' sizes."""
        b, s, h = shape
        size = np.dtype(dtype).itemsize
        row, data = padded(b * s * size), padded(b * s * h * size)
        return {"inputVariance": 0, "inputMean": row, "inputGamma": 2 * row,
                "params": 2 * row + padded(h * size), "outputPdX": 0, "resForGamma": data,
                "outputs": 2 * data}

    def __call__(self):
        core, dtype, (b, s, h) = self.core, self.dtype, self.shape
        size, at = dtype.itemsize, self.layout(self.shape, dtype)
        gm_dy, gm_x, gm_params, gm_out = self.gms
        pipe = TPipe(core)   # LayerNormGrad takes its event ids from the kernel's TPipe
        counts = {"inputDy": b * s * h, "inputX": b * s * h, "inputVariance": b * s,
                  "inputMean": b * s, "inputGamma": h}
        local = {}
        for name, n in counts.items():
            local[name] = core.alloc(padded(n * size) // size, dtype, "VECIN")
        for name in ("outputPdX", "resForGamma"):
            local[name] = core.alloc(b * s * h, dtype, "VECOUT")
        tmp = core.alloc(self.tmp_bytes, np.uint8, "VECCALC")
        self.tensors.update(local, sharedTmpBuffer=tmp)

        def gm(slot, offset, n):
            return GlobalTensor.in_arena(slot, offset, dtype, padded(n * size) // size)

        sources = {"inputDy": gm(gm_dy, 0, counts["inputDy"]),
                   "inputX": gm(gm_x, 0, counts["inputX"]),
                   **{name: gm(gm_params, at[name], counts[name])
                      for name in ("inputVariance", "inputMean", "inputGamma")}}
        with core:
            for name, source in sources.items():
                DataCopy(local[name], source, source.size)
            event = pipe.FetchEventID(HardEvent.MTE2_V)
            SetFlag(HardEvent.MTE2_V, event)
            WaitFlag(HardEvent.MTE2_V, event)
            LayerNormGrad(local["outputPdX"], local["resForGamma"], local["inputDy"],
                          local["inputX"], local["inputVariance"], local["inputMean"],
                          local["inputGamma"], tmp, self.epsilon, self.tiling,
                          is_reuse_source=self.reuse)
            event = pipe.FetchEventID(HardEvent.V_MTE3)
            SetFlag(HardEvent.V_MTE3, event)
            WaitFlag(HardEvent.V_MTE3, event)
            for name in ("outputPdX", "resForGamma"):
                DataCopy(gm(gm_out, at[name], b * s * h), local[name], b * s * h)
