"""The sample kernel around LayerNormGradBeta that `lngb.emulate` runs on one core."""
import numpy as np

from ..tensor import GlobalTensor
from ..vector_ops import DataCopy, HardEvent, SetFlag, WaitFlag
from .layer_norm_grad_beta import LayerNormGradBeta


class SampleKernel:
    """DataCopy GM -> UB of inputDy and resForGamma, LayerNormGradBeta, DataCopy UB -> GM of the
    outputs, with the MTE2 -> V and V -> MTE3 events a TQue-based kernel emits between them.
    `gms` are the four GM byte arrays (inputDy, resForGamma, pdGamma, pdBeta); calling the kernel
    runs the body on `core`; `tensors` names its LocalTensors once it has run (or been
    recorded)."""

    def __init__(self, core, shape, dtype, tmp_bytes, tiling, gms, is_reuse_source=False,
                 reuse_buffer="input_dy"):
        self.core, self.shape, self.dtype = core, shape, np.dtype(dtype)
        self.tmp_bytes, self.tiling, self.gms = tmp_bytes, tiling, gms
        self.reuse = (is_reuse_source, reuse_buffer)
        self.tensors = {}

    def __call__(self):
        core, dtype, (b, s, h) = self.core, self.dtype, self.shape
        gm_dy, gm_rfg, gm_g, gm_b = (GlobalTensor.in_arena(g, 0, dtype, g.size // dtype.itemsize)
                                     for g in self.gms)
        dy = core.alloc(self.shape, dtype, "VECIN")
        rfg = core.alloc(self.shape, dtype, "VECIN")
        out_g = core.alloc(h, dtype, "VECOUT")
        out_b = core.alloc(h, dtype, "VECOUT")
        tmp = core.alloc(self.tmp_bytes, np.uint8, "VECCALC")
        self.tensors.update(inputDy=dy, resForGamma=rfg, outputPdGamma=out_g, outputPdBeta=out_b,
                            sharedTmpBuffer=tmp)
        with core:
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
