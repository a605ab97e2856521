"""``forensics investigate`` without ``--baseline``: this machine against what its hardware should give.

Checks, per GPU, from the snapshot taken now (the ``gpu`` probe, NVML) and the
canary embedded in it:

- **PCIe** generation and width *under load* (the canary's telemetry,
  ``nvmlDeviceGetCurrPcieLinkGeneration``/``Width`` sampled during the run)
  against the maximum the GPU and the slot support (``gen_max``/``width_max``,
  ``nvmlDeviceGetMaxPcieLinkGeneration``/``Width``); an idle link trains down,
  which is normal, so idle readings are not judged;
- **SM clock** under load (median of the busy samples) against the GPU's
  maximum (``nvmlDeviceGetMaxClockInfo``); below 85% is a deviation (the
  canary's matmul briefly meets the SW power cap on a healthy GPU, at full
  clock median: docs/bench.md, 'Limitations');
- **NVLink**: active links against the model's count (only with 2 or more GPUs);
- the canary's **matmul, all-reduce and copy** results against the model's
  figures recorded from real runs (``ceilings.yaml`` next to this module).

A model without recorded figures is said so (exit 3: cannot judge), never guessed.
"""

from __future__ import annotations

import functools
from typing import Any

from forensics.docfile import packaged_yaml
from forensics.errors import EXIT_INCONCLUSIVE, EXIT_OK, EXIT_REGRESSION
from forensics.gpu.readings import CLOCK_SM_MHZ, PCIE_GEN, PCIE_WIDTH

CLOCK_SHARE = 0.85


@functools.lru_cache(maxsize=1)
def ceilings() -> dict[str, Any]:
    """The recorded figures (``ceilings.yaml``), loaded once."""
    return packaged_yaml("forensics.investigate", "ceilings.yaml")


def _check(
    what: str, measured: Any, expected: str, ok: bool | None, source: str, unit: str = ""
) -> dict[str, Any]:
    status = "unknown" if ok is None else ("ok" if ok else "below")
    return {
        "check": what,
        "measured": measured,
        "unit": unit,
        "expected": expected,
        "status": status,
        "source": source,
    }


def gpus_seen(now: dict[str, Any]) -> bool:
    """True when the snapshot's gpu probe (``probes.gpu``, status ok or partial) lists a GPU
    (``data.gpus``): what :func:`judge_alone` judges. False on a machine without an NVIDIA driver."""
    gpu = (now.get("probes") or {}).get("gpu") or {}
    return bool(
        gpu.get("status") in ("ok", "partial") and ((gpu.get("data") or {}).get("gpus") or {})
    )


def judge_alone(now: dict[str, Any]) -> tuple[list[dict[str, Any]], str, int]:
    """Judge one snapshot against its hardware.

    Returns:
        (checks, verdict sentence, exit code): 1 when a check is below what the
        hardware should give, 0 when all checks pass, 3 when nothing could be judged.
    """
    data = ceilings()
    tol = float(data.get("tolerance", 0.1))
    gpu = (now.get("probes") or {}).get("gpu") or {}
    gpus = (
        (gpu.get("data") or {}).get("gpus") or {} if gpu.get("status") in ("ok", "partial") else {}
    )
    bench = now.get("bench") or {}
    tel = (bench.get("telemetry") or {}).get("gpus") or {}
    tp = int((bench.get("config") or {}).get("tp") or 0)
    checks: list[dict[str, Any]] = []
    models = set()
    for uuid, g in gpus.items():
        if not isinstance(g, dict):
            continue
        name = str(g.get("name") or "?")
        models.add(name)
        idx = g.get("index", uuid)
        pcie, t = g.get("pcie") or {}, tel.get(uuid) or {}
        gen, width = (t.get(PCIE_GEN) or {}).get("median"), (t.get(PCIE_WIDTH) or {}).get("median")
        gmax, wmax = pcie.get("gen_max"), pcie.get("width_max")
        if (
            isinstance(gen, (int, float))
            and isinstance(gmax, int)
            and isinstance(width, (int, float))
            and isinstance(wmax, int)
        ):
            checks.append(
                _check(
                    f"GPU {idx} PCIe link under load",
                    f"Gen{gen:g} x{width:g}",
                    f"Gen{gmax} x{wmax}",
                    gen >= gmax and width >= wmax,
                    "NVML during the canary; max from the gpu probe",
                )
            )
        else:
            checks.append(
                _check(
                    f"GPU {idx} PCIe link under load",
                    "not measured under load",
                    f"Gen{gmax} x{wmax}",
                    None,
                    "needs the canary's GPU telemetry",
                )
            )
        clk, cmax = (
            (t.get(CLOCK_SM_MHZ) or {}).get("median"),
            ((g.get("clocks") or {}).get("sm") or {}).get("max_mhz"),
        )
        if isinstance(clk, (int, float)) and isinstance(cmax, (int, float)) and cmax > 0:
            checks.append(
                _check(
                    f"GPU {idx} SM clock under load (median)",
                    clk,
                    f">= {CLOCK_SHARE:.0%} of {cmax:g} MHz",
                    clk >= CLOCK_SHARE * cmax,
                    "NVML during the canary",
                    "MHz",
                )
            )
        model = (data.get("models") or {}).get(name)
        links = (
            (g.get("nvlink") or {}).get("active_links")
            if isinstance(g.get("nvlink"), dict)
            else None
        )
        if model and model.get("nvlink_active_links") and len(gpus) >= 2 and isinstance(links, int):
            checks.append(
                _check(
                    f"GPU {idx} NVLink active links",
                    links,
                    str(model["nvlink_active_links"]),
                    links >= model["nvlink_active_links"],
                    "NVML nvmlDeviceGetNvLinkState",
                )
            )
    results = {r.get("name"): r for r in bench.get("results") or [] if isinstance(r, dict)}
    known = [m for m in models if m in (data.get("models") or {})]
    for name in known:
        model = data["models"][name]
        for key, fig in (model.get("results") or {}).items():
            r = results.get(key)
            if r is None or (fig.get("min_gpus") and tp < fig["min_gpus"]):
                continue
            measured = float(r["median"])
            ok = measured >= fig["low"] * (1 - tol)
            checks.append(
                _check(
                    f"{key} ({fig.get('what', '')})",
                    round(measured, 3),
                    f"{fig['low']:g}-{fig['high']:g} {fig['unit']} ({measured / fig['high']:.0%} of the best)",
                    ok,
                    f"recorded on {name}: {model.get('source', '')}".strip(),
                    fig["unit"],
                )
            )
    below = [c for c in checks if c["status"] == "below"]
    judged = [c for c in checks if c["status"] != "unknown"]
    if not gpus:
        return (
            checks,
            (
                "Cannot judge this machine alone: no GPU seen (the gpu probe has no data); give --baseline "
                "to compare with an earlier snapshot."
            ),
            EXIT_INCONCLUSIVE,
        )
    unknown = sorted(models - set(known))
    caveat = (
        f" No recorded figures for {', '.join(unknown)}: only PCIe, clocks and NVLink were judged."
        if unknown
        else ""
    )
    if below:
        what = "; ".join(
            f"{c['check']}: {c['measured']} {c['unit']} (expected {c['expected']})".replace(
                "  ", " "
            )
            for c in below
        )
        return (
            checks,
            f"{len(below)} deviation(s) from what this hardware should give: {what}.{caveat}",
            EXIT_REGRESSION,
        )
    if not judged:
        return (
            checks,
            f"Cannot judge this machine alone: nothing measured under load.{caveat}",
            EXIT_INCONCLUSIVE,
        )
    return (
        checks,
        (
            f"No deviation: {len(judged)} checks against what {', '.join(sorted(models))} should give "
            f"passed.{caveat}"
        ),
        EXIT_OK,
    )
