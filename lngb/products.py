"""The supported products (spec vector_unit.md §1.2, §3.3, §8.3) and the unsupported ones."""
from dataclasses import dataclass

from .errors import InvalidArgumentError, UnsupportedProductError


@dataclass(frozen=True)
class Product:
    name: str
    arch: int               # __NPU_ARCH__
    ub_size: int            # physical unified buffer, bytes
    reserved_bytes: int     # kept back by CANN's default build; AICore(reserved_bytes=0) lifts it
    saturation_default: bool
    saturation_only: bool
    kernel_path: str        # "common" (A2/A3/310P source) or "regbase" (Ascend 950 source)
    clock_mhz: int
    vector_cores: int
    event_ids: int = 8
    div_sqrt: str = "ieee"  # Div/Sqrt by default: "ftz", the 950's intrinsics (no subnormals)

    @property
    def usable_ub(self):
        return self.ub_size - self.reserved_bytes


KIB = 1024
VREG_COUNT, VREG_BYTES = 32, 256   # the 950's 32 RegTensors (spec regbase.md §1.2)
SCALAR_REGISTERS = 64              # 4-byte registers GetValue reads UB values into
CMPMASK_BYTES = 16                 # the compare-mask register SetCmpMask loads (UNCONFIRMED width)
CONTROL_BYTES = 128                # room for it, keeping core memory whole 128-byte granules


def core_bytes(ub_size):
    """A core's memory array: the UB, the vector registers, the scalar registers, then the
    compare-mask register."""
    return cmpmask_address(ub_size) + CONTROL_BYTES


def cmpmask_address(ub_size):
    return ub_size + VREG_COUNT * VREG_BYTES + 4 * SCALAR_REGISTERS


PRODUCTS = {
    # A2/A3: ASC_UB_SIZE = 192K - 256, and the default build reserves 8 KiB more for some APIs.
    "atlas-a2": Product("atlas-a2", 2201, 192 * KIB, 256 + 8 * KIB, False, False, "common", 1800, 48),
    "atlas-a3": Product("atlas-a3", 2201, 192 * KIB, 256 + 8 * KIB, False, False, "common", 1850, 48),
    # 310P AI Core: TOTAL_VEC_LOCAL_SIZE = 248K; saturation mode only.
    "atlas-inference": Product("atlas-inference", 2002, 256 * KIB, 8 * KIB, True, True, "common", 1060, 10),
    # Ascend 950: 256 KiB physical, 248 KiB usable by default.
    "atlas-350": Product("atlas-350", 3510, 256 * KIB, 8 * KIB, False, False, "regbase", 1800, 72,
                         div_sqrt="ftz"),
}

# LayerNormGradBeta's and LayerNormGrad's support table (DOC; spec layernorm_grad.md §1.7): these
# products exist but the APIs are not offered there.
UNSUPPORTED = {
    "atlas-200i-500-a2": "Atlas 200I/500 A2 inference products",
    "atlas-inference-vector-core": "Atlas inference series Vector Core",
    "atlas-training": "Atlas training series (910)",
}

SUPPORT_TABLE = ("LayerNormGradBeta and LayerNormGrad support: Ascend 950PR/950DT (atlas-350), "
                 "Atlas A3 (atlas-a3), "
                 "Atlas A2 (atlas-a2), Atlas inference series AI Core (atlas-inference); "
                 "not supported: Atlas 200I/500 A2, Atlas inference series Vector Core, "
                 "Atlas training series")


def get_product(name, api=None):
    """The Product named `name` (or `name` itself, a Product); errors name `api`, the function
    the user called, if given."""
    if isinstance(name, Product):
        return name
    where = f"{api}: " if api else ""
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{where}product must be a product name "
                                   f"({', '.join(PRODUCTS)}), got {name!r}")
    if name in PRODUCTS:
        return PRODUCTS[name]
    if name in UNSUPPORTED:
        raise UnsupportedProductError(
            f"{where}product {name!r} ({UNSUPPORTED[name]}) is not supported. {SUPPORT_TABLE}.")
    raise UnsupportedProductError(
        f"{where}unknown product {name!r}; valid names: {', '.join(PRODUCTS)}")
