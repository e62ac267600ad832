"""Hardware cost of a candidate on this worker's device: measured under the device lock,
cached by architecture and device, with the context to read it (FLOP/s, fraction of peak)."""

from __future__ import annotations

import hashlib
import json
import time
import warnings
from collections.abc import Callable
from typing import Any

import keras
import sqlalchemy.exc

from nas.search.hardware.device import describe_device, device_key, lock_name
from nas.search.hardware.figures import HardwareCost, Latency, Throughput
from nas.search.hardware.lock import DeviceLock
from nas.search.hardware.peaks import data_sheet_peak
from nas.search.hardware.reference import REFERENCE_SHAPE, REFERENCE_VERSION, reference_forward, reference_model
from nas.search.hardware.timing import measure_latency, measure_matmul_peak, measure_throughput
from nas.search.space import MeasureSpec
from nas.storage import ENV_VAR, CacheKey, MeasurementCache, open_device_profile


def architecture_signature(model: keras.Model) -> str:
    """Same network, same signature: the functional config holds every layer and connection
    (dtype policies included), and nothing about training or weights. Dropout is the
    identity at inference, so its rate is left out: candidates that differ only in training
    settings share their measurements."""
    config = model.get_config()
    for layer in config.get("layers", []):
        if layer.get("class_name") == "Dropout":
            layer["config"] = {k: v for k, v in layer["config"].items() if k not in ("rate", "seed")}
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()


# Figures of the device rather than of a network: the same in every database on this machine.
DEVICE_WIDE = ("reference", "peak")


class HardwareProfiler:
    """Measures candidates on this process's device; one per worker."""

    def __init__(self, spec: MeasureSpec, cache: MeasurementCache | None) -> None:
        self.spec = spec
        self.cache = cache
        # Device-wide figures also go to the machine's device profile (NAS_DEVICE_PROFILE), so
        # a new database starts from them; never without a cache (cache=None: measure all).
        self.profile = open_device_profile() if cache else None
        self.device = describe_device()
        self.lock = DeviceLock(lock_name(self.device))
        self._peaks: dict[str, tuple[float, str] | None] = {}
        self._baselines: dict[int, float] = {}
        self.lock_wait_s = 0.0  # summed over this profiler's measurements

    def _key(self, kind: str, signature: str, shape: str, batch: int, precision: str, xla: bool) -> CacheKey:
        return CacheKey(
            kind,
            signature,
            shape,
            batch,
            precision,
            xla,
            device_key(self.device, precision=precision, xla=xla),
        )

    def _lookup_or_measure(
        self, key: CacheKey, measure: Callable[[], dict[str, Any]], effort: float = 0.0
    ) -> tuple[dict[str, Any], bool]:
        """The cached result for `key`, else `measure()` run alone on the device and stored.
        Returns the result and whether it came from the cache. A device-wide figure carries
        its `effort` (baseline rounds, peak seconds): the profile serves it only to a caller
        asking for no more, so a smoke run's brief figures never stand in for a real run's."""
        stored = self.cache.get(key) if self.cache else None
        if stored is not None:
            return stored, True
        device_wide = key.kind in DEVICE_WIDE
        if self.cache and device_wide and (profiled := self._profile_entry(key, effort)):
            return self.cache.put(key, self.device, *profiled), True
        waiting = time.perf_counter()
        with self.lock.exclusive():
            t0 = time.perf_counter()
            self.lock_wait_s += t0 - waiting
            result = measure() | ({"effort": effort} if device_wide else {})
        seconds = time.perf_counter() - t0
        if self.cache:
            result = self.cache.put(key, self.device, result, seconds)
        if device_wide:
            self._profile_put(key, result, seconds)
        return result, False

    def _profile_entry(self, key: CacheKey, effort: float) -> tuple[dict[str, Any], float] | None:
        try:
            entry = self.profile.entry(key) if self.profile else None
        except sqlalchemy.exc.SQLAlchemyError as exc:
            self._drop_profile(exc)
            return None
        return entry if entry and entry[0].get("effort", 0.0) >= effort else None

    def _profile_put(self, key: CacheKey, result: dict[str, Any], seconds: float) -> None:
        try:
            stored = self.profile.put(key, self.device, result, seconds) if self.profile else result
            if self.profile and stored.get("effort", 0.0) < result["effort"]:
                self.profile.replace(key, result, seconds)  # a briefer figure was there first
        except sqlalchemy.exc.SQLAlchemyError as exc:
            self._drop_profile(exc)

    def _drop_profile(self, exc: Exception) -> None:
        """The profile only saves time: a failing one (a full disk, a lock held too long) is
        left alone for the rest of this process, never a failed trial."""
        self.profile = None
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        warnings.warn(f"device profile ({ENV_VAR}) not used from here on: {reason}", RuntimeWarning, stacklevel=2)

    def baseline(self, batch: int) -> float:
        """The reference network's images/s on this device at `batch`: measured once (long,
        alone on the device) and stored, so every process on the device shares one scale."""
        if batch not in self._baselines:
            shape = "x".join(map(str, REFERENCE_SHAPE))
            result, _ = self._lookup_or_measure(
                self._key("reference", REFERENCE_VERSION, shape, batch, "float32", False),
                # The baseline scales every figure on the device: measured longer than a candidate.
                lambda: {
                    "images_per_s": measure_throughput(
                        reference_model(),
                        batch,
                        rounds=self.spec.baseline_rounds,
                        round_seconds=self.spec.round_seconds,
                        warmup_seconds=self.spec.warmup_seconds,
                    ).images_per_s
                },
                effort=self.spec.baseline_rounds * self.spec.round_seconds,  # seconds timed
            )
            self._baselines[batch] = float(result["images_per_s"])
        return self._baselines[batch]

    def throughput(self, model: keras.Model, batch: int, *, xla: bool) -> Throughput:
        """One throughput measurement by the space's protocol (no cache)."""
        reference = reference_forward(batch, self.spec.warmup_seconds) if self.spec.reference else None
        return measure_throughput(
            model,
            batch,
            rounds=self.spec.rounds,
            round_seconds=self.spec.round_seconds,
            max_spread=self.spec.max_spread,
            jit_compile=xla,
            reference=reference,
            baseline=self.baseline(batch) if reference else None,
            warmup_seconds=self.spec.warmup_seconds,
        )

    def measure(self, model: keras.Model, *, precision: str, xla: bool, need_latency: bool = False) -> HardwareCost:
        started, waited = time.perf_counter(), self.lock_wait_s
        signature = architecture_signature(model)
        shape = "x".join(str(d) for d in model.input_shape[1:])
        cached: dict[str, bool] = {}
        throughput: dict[int, Throughput] = {}
        # Interleaved figures are another protocol: never mixed with plain ones in the cache.
        kind = "throughput-ref" if self.spec.reference else "throughput"
        for batch in self.spec.batch_sizes:
            if self.spec.reference:
                self.baseline(batch)  # outside the candidate's lock: it may need a lock of its own
            result, cached[f"throughput@{batch}"] = self._lookup_or_measure(
                self._key(kind, signature, shape, batch, precision, xla),
                lambda batch=batch: self.throughput(model, batch, xla=xla).to_dict(),  # type: ignore[misc]
            )
            throughput[batch] = Throughput.from_dict(result)
        latency = None
        if self.spec.latency is not False or need_latency:  # unset: measured (SpaceSpec.search_measure)
            result, cached["latency"] = self._lookup_or_measure(
                self._key("latency", signature, shape, 1, precision, xla),
                lambda: measure_latency(
                    model,
                    seconds=self.spec.latency_seconds,
                    max_spread=self.spec.max_spread,
                    jit_compile=xla,
                    warmup_seconds=self.spec.warmup_seconds,
                ).to_dict(),
            )
            latency = Latency.from_dict(result)
        seconds = time.perf_counter() - started
        waited = self.lock_wait_s - waited
        return HardwareCost(throughput, latency, self.device, precision, xla, cached, seconds, signature, waited)

    def peak_flops(self, precision: str) -> tuple[float, str] | None:
        """The device's peak FLOP/s for `precision` and where it comes from: a measured matmul
        (cached like any other measurement), on a GPU in the policy's compute type; the GPU's
        data sheet when measuring fails there (out of memory under a worker's cap)."""
        if precision in self._peaks:
            return self._peaks[precision]
        gpu = self.device.get("kind") == "gpu"
        n, dtype = (
            (8192, {"mixed_float16": "float16", "mixed_bfloat16": "bfloat16"}.get(precision, "float32"))
            if gpu
            else (1024, "float32")
        )
        peak: tuple[float, str] | None
        try:
            result, _ = self._lookup_or_measure(
                self._key("peak", f"matmul-{n}-{dtype}", f"{n}x{n}", 1, dtype, False),
                lambda: {"flops_per_s": measure_matmul_peak(seconds=self.spec.peak_seconds, n=n, dtype=dtype)},
                effort=self.spec.peak_seconds,
            )
            peak = float(result["flops_per_s"]), f"measured: {n}x{n} {dtype} matmul"
        except Exception:  # any TensorFlow failure here (out of memory) leaves only the data sheet
            if not gpu:
                raise
            peak = data_sheet_peak(self.device, precision)
        self._peaks[precision] = peak
        return peak
