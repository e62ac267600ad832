"""This worker's device: its description, the device lock, the timing protocol and the
profiler that caches measurements."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.hardware.device import describe_device as describe_device
    from nas.search.hardware.device import device_identity as device_identity
    from nas.search.hardware.device import device_key as device_key
    from nas.search.hardware.device import device_label as device_label
    from nas.search.hardware.device import device_labels as device_labels
    from nas.search.hardware.device import lock_name as lock_name
    from nas.search.hardware.device import unsupported_precisions as unsupported_precisions
    from nas.search.hardware.figures import HardwareCost as HardwareCost
    from nas.search.hardware.gpus import check_placed_gpu as check_placed_gpu
    from nas.search.hardware.gpus import require_visible_gpus as require_visible_gpus
    from nas.search.hardware.gpus import visible_to_this_process as visible_to_this_process
    from nas.search.hardware.intervals import overlap as overlap
    from nas.search.hardware.lock import DeviceLock as DeviceLock
    from nas.search.hardware.profiler import HardwareProfiler as HardwareProfiler
    from nas.search.hardware.profiler import architecture_signature as architecture_signature
    from nas.search.hardware.reference import reference_forward as reference_forward
    from nas.search.hardware.timing import measure_latency as measure_latency
    from nas.search.hardware.timing import measure_matmul_peak as measure_matmul_peak
    from nas.search.hardware.timing import measure_throughput as measure_throughput
    from nas.search.hardware.timing import measure_together as measure_together

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "intervals": ["overlap"],
        "gpus": ["check_placed_gpu", "require_visible_gpus", "visible_to_this_process"],
        "reference": ["reference_forward"],
        "device": [
            "describe_device",
            "device_identity",
            "device_key",
            "device_label",
            "device_labels",
            "lock_name",
            "unsupported_precisions",
        ],
        "lock": ["DeviceLock"],
        "figures": ["HardwareCost"],
        "profiler": ["HardwareProfiler", "architecture_signature"],
        "timing": ["measure_latency", "measure_matmul_peak", "measure_throughput", "measure_together"],
    },
)

__all__ = [
    "DeviceLock",
    "HardwareCost",
    "HardwareProfiler",
    "architecture_signature",
    "check_placed_gpu",
    "describe_device",
    "device_identity",
    "device_key",
    "device_label",
    "device_labels",
    "lock_name",
    "measure_latency",
    "measure_matmul_peak",
    "measure_throughput",
    "measure_together",
    "overlap",
    "reference_forward",
    "require_visible_gpus",
    "unsupported_precisions",
    "visible_to_this_process",
]
