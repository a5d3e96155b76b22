"""The GPU the book's numbers are about: the one the notebook runs on, the reference GPU, the GPUs students get.

Every default that depends on the hardware (SMs, resident threads and blocks per SM, the FP64 peak, the
memory bandwidth) comes from one :class:`GPU`:

* :func:`current` is the GPU the code runs on (the driver's numbers, :func:`~labhelpers.models.occupancy.device_limits`),
  and under the simulator the **reference GPU** (:func:`reference`): the one that measured the shipped reference
  data, read from its device record ``ch01_device_properties``, so simulator output quotes that GPU by name;
* :func:`student_gpu` describes the GPUs a student gets (Colab's T4, L4 and A100, and the H100 and H200) from
  NVIDIA's datasheets (``data/datasheets.json``) and the SM presets of
  :data:`~labhelpers.models.occupancy.STUDENT_GPUS`.

Peaks without a datasheet figure (the FP64 peak of a T4 or an L4) follow from the FP32 peak and the FP64:FP32
lane ratio of the compute capability (:data:`~labhelpers.roofline.model.FP64_LANES_PER_SM`).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import refdata, validate
from .device import DeviceInfo, device_info
from .models import occupancy
from .roofline.ceilings import datasheet_entry, fp32_peak_at_clock
from .roofline.model import FP32_LANES_PER_SM, FP64_LANES_PER_SM

#: The reference data that carries the reference GPU's device record (``labhelpers.device_info().as_dict()``).
DEVICE_RECORD = occupancy.REFERENCE_DEVICE_RECORD

#: The GPUs students get, by datasheet name: (name as the driver reports it, compute capability).
STUDENT_GPU_NAMES: dict[str, tuple[str, str]] = {
    "T4": ("Tesla T4", "7.5"),
    "L4": ("NVIDIA L4", "8.9"),
    "A100": ("NVIDIA A100-SXM4-40GB", "8.0"),
    "H100": ("NVIDIA H100 80GB HBM3", "9.0"),
    "H200": ("NVIDIA H200", "9.0"),
}
#: The GPUs Colab offers (free tier first).
COLAB_GPUS = ("T4", "L4", "A100")
#: Below this FP64:FP32 ratio a GPU is *FP64-poor* (a T4 has 1/32, an L4 1/64; an A100 or H100 1/2).
FP64_POOR_RATIO = 1 / 8


@dataclass(frozen=True)
class GPU:
    """What the book needs to know of one GPU.

    Attributes:
        name: the GPU as the driver names it, e.g. ``"Tesla T4"``.
        compute_capability: e.g. ``"7.5"``.
        sm_count: streaming multiprocessors.
        sm: the limits of one SM (:class:`~labhelpers.models.occupancy.SMLimits`).
        dram_gbs: device-memory bandwidth in GB/s (datasheet, else from memory clock and bus width), or None.
        fp32_gflops, fp64_gflops: FMA peaks in GFLOP/s (datasheet, else from SMs, lanes and clock), or None.
        where: ``"this GPU"``, ``"reference GPU"`` or ``"datasheet"``: whose numbers these are.
    """

    name: str
    compute_capability: str
    sm_count: int
    sm: occupancy.SMLimits
    dram_gbs: float | None
    fp32_gflops: float | None
    fp64_gflops: float | None
    where: str

    @property
    def is_live(self) -> bool:
        """True when these are the numbers of the GPU the code runs on."""
        return self.where == "this GPU"

    @property
    def label(self) -> str:
        """How text and legends name it: ``"this GPU (Tesla T4)"``, ``"reference GPU (NVIDIA H200)"``."""
        return f"{self.where} ({self.name})"

    @property
    def resident_threads(self) -> int:
        """Threads the whole GPU holds at once: SMs times threads per SM."""
        return self.sm_count * self.sm.max_threads_per_sm

    @property
    def fp64_ratio(self) -> float:
        """FP64 peak over FP32 peak (1/2 on an A100 or H100, 1/32 on a T4, 1/64 on an L4)."""
        if self.fp64_gflops and self.fp32_gflops:
            return self.fp64_gflops / self.fp32_gflops
        return _lane_ratio(self.compute_capability) or 1.0

    @property
    def fp64_poor(self) -> bool:
        """True when FP64 runs at less than :data:`FP64_POOR_RATIO` of FP32 (T4, L4, consumer GPUs)."""
        return self.fp64_ratio < FP64_POOR_RATIO

    def blocks_per_sm(self, threads: int) -> int:
        """Blocks of ``threads`` threads one SM holds when threads and block slots are the only limits."""
        return self.sm.resident_blocks(threads)


def _cc_tuple(cc: str) -> tuple[int, int]:
    major, _, minor = str(cc).partition(".")
    return int(major), int(minor or 0)


def _lane_ratio(cc: str) -> float | None:
    key = _cc_tuple(cc)
    if key in FP32_LANES_PER_SM and key in FP64_LANES_PER_SM:
        return FP64_LANES_PER_SM[key] / FP32_LANES_PER_SM[key]
    return None


def _peaks(name: str, cc: str, fallback_dram: float | None, fallback_fp32: float | None):
    """(DRAM GB/s, FP32, FP64 GFLOP/s): the datasheet's where it has them, else the fallbacks and lane ratio."""
    entry = datasheet_entry(name) or {}
    dram = entry.get("dram_gbs") or fallback_dram
    fp32 = entry.get("fp32_gflops") or fallback_fp32
    fp64 = entry.get("fp64_gflops")
    ratio = _lane_ratio(cc)
    if fp64 is None and fp32 and ratio:
        fp64 = fp32 * ratio
    return (None if dram is None else float(dram), None if fp32 is None else float(fp32),
            None if fp64 is None else float(fp64))


def from_device_info(info: DeviceInfo, where: str = "this GPU") -> GPU:
    """A :class:`GPU` from the driver's properties (``labhelpers.device_info()`` or a faked one)."""
    if info.is_simulator or info.compute_capability is None:
        raise validate.ArgumentError("the simulator is no GPU: use gpus.current(), which gives the reference GPU "
                                     "there, or gpus.reference()")
    sm = occupancy.device_limits(info)
    dram, fp32, fp64 = _peaks(info.name, info.cc, info.peak_memory_bandwidth_gbs, fp32_peak_at_clock(info))
    return GPU(name=info.name, compute_capability=info.cc, sm_count=int(info.sm_count or 1), sm=sm, dram_gbs=dram,
               fp32_gflops=fp32, fp64_gflops=fp64, where=where)


def reference() -> GPU:
    """The reference GPU (the one that measured the chosen reference set), from its device record."""
    ref = refdata.load_reference(DEVICE_RECORD)
    props = dict(zip(ref.table["property"], ref.table["value"]))
    cc = str(props.get("compute_capability") or ref.meta["compute_capability"])
    name = str(props.get("name") or ref.gpu)
    sm_count = int(props.get("sm_count") or ref.meta.get("sm_count") or 1)
    sm = occupancy.limits_for(cc)
    lanes = FP32_LANES_PER_SM.get(_cc_tuple(cc))
    clock = props.get("clock_khz")
    fp32_at_clock = sm_count * lanes * 2 * float(clock) * 1e3 / 1e9 if lanes and clock else None
    dram, fp32, fp64 = _peaks(name, cc, props.get("peak_memory_bandwidth_gbs"), fp32_at_clock)
    return GPU(name=name, compute_capability=cc, sm_count=sm_count, sm=sm, dram_gbs=dram, fp32_gflops=fp32,
               fp64_gflops=fp64, where="reference GPU")


def from_record(name: str, compute_capability: str, sm_count: int, where: str = "recorded GPU") -> GPU:
    """A :class:`GPU` from the few fields a measurement records (its name, compute capability and SMs), with the
    datasheet's peaks where the name is known."""
    cc = str(compute_capability)
    dram, fp32, fp64 = _peaks(name, cc, None, None)
    return GPU(name=name, compute_capability=cc, sm_count=int(sm_count), sm=occupancy.limits_for(cc), dram_gbs=dram,
               fp32_gflops=fp32, fp64_gflops=fp64, where=where)


def current(info: DeviceInfo | None = None) -> GPU:
    """The GPU the code runs on; under the simulator, the reference GPU (:func:`reference`)."""
    info = info or device_info()
    if info.is_simulator:
        return reference()
    return from_device_info(info)


def student_gpu(key: str) -> GPU:
    """A GPU students get, by its datasheet name: ``"T4"``, ``"L4"``, ``"A100"``, ``"H100"`` or ``"H200"``."""
    key = validate.choice(key, "key", tuple(STUDENT_GPU_NAMES))
    name, cc = STUDENT_GPU_NAMES[key]
    entry = datasheet_entry(name) or {}
    dram, fp32, fp64 = _peaks(name, cc, None, None)
    return GPU(name=name, compute_capability=cc, sm_count=int(entry.get("sm_count") or 1),
               sm=occupancy.limits_for(cc), dram_gbs=dram, fp32_gflops=fp32, fp64_gflops=fp64, where="datasheet")
