"""Deployable forms: converters (TFLite, SavedModel, ONNX, TF-TRT, TensorRT), their
parity checks, and scoring a trained model in the form it ships in."""

from typing import TYPE_CHECKING

from nas._lazy import lazy_exports

if TYPE_CHECKING:
    from nas.search.deploy.converters import QUANTIZABLE as QUANTIZABLE
    from nas.search.deploy.converters import QUANTIZE_MODES as QUANTIZE_MODES
    from nas.search.deploy.converters import Written as Written
    from nas.search.deploy.converters import check_packages as check_packages
    from nas.search.deploy.converters import tensorrt_engine_status as tensorrt_engine_status
    from nas.search.deploy.converters import tensorrt_status as tensorrt_status
    from nas.search.deploy.converters import write_tflite as write_tflite
    from nas.search.deploy.deployed import Deployed as Deployed
    from nas.search.deploy.scoring import deploy as deploy

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "converters": [
            "QUANTIZABLE",
            "QUANTIZE_MODES",
            "Written",
            "check_packages",
            "tensorrt_engine_status",
            "tensorrt_status",
            "write_tflite",
        ],
        "deployed": ["Deployed"],
        "scoring": ["deploy"],
    },
)

__all__ = [
    "QUANTIZABLE",
    "QUANTIZE_MODES",
    "Deployed",
    "Written",
    "check_packages",
    "deploy",
    "tensorrt_engine_status",
    "tensorrt_status",
    "write_tflite",
]
