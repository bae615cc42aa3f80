"""The roofline model: how far a case's achieved rate is from what the runner's hardware can do.

Source: S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful visual performance model
for multicore architectures", CACM 52(4), 2009. A kernel of arithmetic intensity ``I`` (FLOP per
byte of memory traffic, here the problem's ``flops(case) / bytes(case)``: its *minimum* traffic)
can reach at most

    attainable = min(peak_flops, I * bandwidth)

and its share of the roofline is ``achieved / attainable`` (1 = on the roof). Equivalently
``max(achieved_flops / peak_flops, achieved_bytes_per_s / bandwidth)``: the tighter of the two
ceilings. The ceilings are the runner's own measurements (:mod:`kernelrank.runner.host.ceilings`:
copy bandwidth, dense matmul rate per dtype), taken from its heartbeat and stored with each
result (:func:`attach`), so a share never depends on a datasheet.

Pure functions over plain numbers and JSON-ready dicts (no torch): the control worker calls
:func:`attach` when it records a run, ``kernelrank eval --roofline`` when it has measured this
machine; the pages, the API and the CLI only read what it wrote.
"""

from __future__ import annotations

from typing import Any

from kernelrank.format import positive
from kernelrank.vocab import CaseKind, DeviceClass

#: Bounds of a case on the roofline: below the ridge point memory bandwidth limits it, above it
#: the compute peak does.
MEMORY, COMPUTE = "memory", "compute"
#: The dtype whose matmul rate is the compute ceiling when neither the case nor the problem names one.
DEFAULT_DTYPE = "float32"
#: The physics floor: a case whose roofline share exceeds ``1 + FLOOR_MARGIN`` ran faster than
#: the runner's measured hardware allows (a wrong flop or byte count, outputs not computed, or
#: work done outside the timed window); its submission is held for an admin's review, unranked
#: (:func:`beyond_floor`). The margin covers a kernel that beats torch's own copy or matmul, which
#: the ceilings are measured with, and what is left of the probes' noise after their best is taken.
FLOOR_MARGIN = 0.25
#: How a held submission's review reason starts (``judgement`` and the admin's clearing read it).
FLOOR_REASON = "beyond the physics floor: "


def attainable_tflops(intensity: float, peak_tflops: float, bandwidth_gbps: float) -> float:
    """``min(peak, intensity * bandwidth)`` in TFLOP/s.

    Args:
        intensity: FLOP per byte.
        peak_tflops: compute ceiling, TFLOP/s (10^12 FLOP/s).
        bandwidth_gbps: memory ceiling, GB/s (10^9 bytes/s).
    """
    return min(peak_tflops, intensity * bandwidth_gbps / 1e3)


def ridge_intensity(peak_tflops: float, bandwidth_gbps: float) -> float:
    """The intensity (FLOP/byte) where the two ceilings meet: ``peak / bandwidth``."""
    return peak_tflops * 1e3 / bandwidth_gbps


def case_roofline(tflops: Any, gbps: Any, peak_tflops: Any, bandwidth_gbps: Any) -> dict[str, Any] | None:
    """A case's place under the roofline from its achieved rates and the ceilings.

    Args:
        tflops: achieved TFLOP/s (``flops / mean time``), or ``None`` when the problem states no flops.
        gbps: achieved GB/s (``bytes / mean time``), or ``None`` when it states no bytes.
        peak_tflops: the compute ceiling (TFLOP/s) for the case's dtype, or ``None``.
        bandwidth_gbps: the memory ceiling (GB/s), or ``None``.

    Returns:
        ``{"share", "bound", "intensity", "attainable_tflops", "peak_tflops", "bandwidth_gbps"}``
        with ``share = achieved / attainable`` (``intensity`` and ``attainable_tflops`` only where
        both flops and bytes are known; with only one, the share of that one ceiling); ``None``
        when no achieved rate has its ceiling. Values that are missing, zero or not finite count
        as unknown.
    """
    f, b = positive(tflops), positive(gbps)
    peak, bw = positive(peak_tflops), positive(bandwidth_gbps)
    if f is not None and b is not None and peak is not None and bw is not None:
        intensity = f * 1e3 / b
        roof = attainable_tflops(intensity, peak, bw)
        bound = MEMORY if intensity < ridge_intensity(peak, bw) else COMPUTE
        return {"share": f / roof, "bound": bound, "intensity": intensity, "attainable_tflops": roof,
                "peak_tflops": peak, "bandwidth_gbps": bw}
    if b is not None and bw is not None:
        return {"share": b / bw, "bound": MEMORY, "intensity": None, "attainable_tflops": None,
                "peak_tflops": peak, "bandwidth_gbps": bw}
    if f is not None and peak is not None:
        return {"share": f / peak, "bound": COMPUTE, "intensity": None, "attainable_tflops": None,
                "peak_tflops": peak, "bandwidth_gbps": bw}
    return None


def ceiling_dtype(spec: dict[str, Any] | None, rates: dict[str, Any], problem_dtype: str | None) -> str | None:
    """The dtype whose matmul rate is a case's compute ceiling: the case's own ``dtype``
    parameter, else the problem's (its output's, in the data contract), else
    :data:`DEFAULT_DTYPE`, the first of those the runner measured; ``None`` when it measured none."""
    for candidate in ((spec or {}).get("dtype"), problem_dtype, DEFAULT_DTYPE):
        if isinstance(candidate, str) and candidate.removeprefix("torch.") in rates:
            return candidate.removeprefix("torch.")
    return None


def clean_ceilings(ceilings: Any) -> dict[str, Any] | None:
    """``ceilings`` as a runner reported them (:func:`kernelrank.runner.host.ceilings.measure`), kept
    only where it has a positive copy bandwidth or matmul rate (heartbeats are data from another
    machine); ``None`` otherwise."""
    if not isinstance(ceilings, dict):
        return None
    rates = ceilings.get("matmul_tflops")
    rates = {str(k): float(v) for k, v in rates.items() if positive(v) is not None} if isinstance(rates, dict) else {}
    bw = positive(ceilings.get("copy_gbps"))
    if bw is None and not rates:
        return None
    return {**ceilings, "copy_gbps": bw, "matmul_tflops": rates}


def beyond_floor(result: dict[str, Any], device: str) -> str | None:
    """Why a run's result is beyond the physics floor, or ``None``: the first benchmark case whose
    ``roofline`` share (:func:`attach`) exceeds ``1 + FLOOR_MARGIN``. A memory-bound share counts
    on CUDA only, where each call starts with the L2 flushed; on the CPU nothing is flushed, so a
    case whose data stays in cache may honestly beat the memory copy ceiling (measured on a buffer
    far larger than the cache). A compute-bound share counts everywhere.

    The compute ceiling held against is the runner's highest matmul rate over the dtypes it
    measured, not the case's dtype's (the share shown): a bfloat16 case computed in float32 on a
    CPU without bfloat16 matmul units honestly beats its dtype's matmul rate, and on a GPU a
    float32 case may use TF32 tensor cores (docs/judging.md, 'Roofline').

    Args:
        result: a run's result (``EvalResult.to_dict()`` shape) after :func:`attach`.
        device: the device class that ran it (``cpu`` or ``cuda``).
    """
    clean = clean_ceilings(result.get("ceilings"))
    for case in result.get("cases") or []:
        roof = case.get("roofline") if isinstance(case, dict) else None
        if roof is not None and clean is not None and clean["matmul_tflops"]:
            roof = case_roofline(case.get("tflops"), case.get("gbps"), max(clean["matmul_tflops"].values()),
                                 clean["copy_gbps"]) or roof
        share = positive((roof or {}).get("share"))
        if share is None or share <= 1 + FLOOR_MARGIN:
            continue
        if roof.get("bound") == MEMORY and device != DeviceClass.cuda:
            continue
        spec = " ".join(f"{k}={v}" for k, v in (case.get("spec") or {}).items() if k != "seed")
        return (f"{FLOOR_REASON}benchmark case {case.get('index')} ({spec}) reads {share:.0%} of the runner's "
                f"measured {roof.get('bound')} roofline (at most {1 + FLOOR_MARGIN:.0%} is physical): a wrong "
                "flop or byte count, outputs not computed, or work outside the timed window")
    return None


def attach(result: dict[str, Any], ceilings: Any, problem_dtype: str | None = None) -> dict[str, Any]:
    """Store ``ceilings`` in a run's result (``EvalResult.to_dict()`` shape) and each benchmark
    case's ``roofline`` (:func:`case_roofline`, with ``dtype`` added), in place; returns ``result``.
    A case's compute ceiling is its dtype's matmul rate (:func:`ceiling_dtype`), or float32's where
    that is faster (``peak_dtype`` then says so): a lower precision is never a lower ceiling.
    Without usable ceilings (:func:`clean_ceilings`) the result is left as it is."""
    clean = clean_ceilings(ceilings)
    if clean is None:
        return result
    result["ceilings"] = clean
    rates = clean["matmul_tflops"]
    for case in result.get("cases") or []:
        if not isinstance(case, dict) or case.get("kind") != CaseKind.benchmark:
            continue
        dtype = ceiling_dtype(case.get("spec") if isinstance(case.get("spec"), dict) else None, rates, problem_dtype)
        peak_dtype = dtype
        if dtype is not None and rates.get(DEFAULT_DTYPE, 0) > rates[dtype]:
            # a CPU without bfloat16 or float16 matmul units computes such cases at float32's rate
            peak_dtype = DEFAULT_DTYPE
        roof = case_roofline(case.get("tflops"), case.get("gbps"), rates.get(peak_dtype) if peak_dtype else None,
                             clean["copy_gbps"])
        if roof is not None:
            roof["dtype"] = dtype
            if peak_dtype != dtype:
                roof["peak_dtype"] = peak_dtype
            case["roofline"] = roof
    return result
