"""The gpu probe's judge as pairs of snapshot sections (real shapes from the H200 capture, edited)."""

import copy

import pytest
from _fakenvml import FakePynvml
from forensics_probes.gpu import GpuProbe

from forensics.gpu.nvml import Nvml
from forensics.gpu.sampler import summarise
from forensics.model import HypothesisStatus as H
from forensics.model import ProbeStatus, Severity
from forensics.probe import JudgeContext, ProbeContext, ProbeResult
from forensics.readers import CommandResult
from tests.conftest import FIXTURES, ROOT

U0 = "GPU-00000000-1111-2222-3333-000000000000"
TOPO = (FIXTURES / "h200x2" / "nvidia-smi-topo.txt").read_text()


def data(state="idle", edit=None):
    p = GpuProbe(
        nvml=Nvml(FakePynvml(state, edit=edit)), topo_runner=lambda a, t: CommandResult(True, TOPO)
    )
    return p.collect(ProbeContext({}))


IDLE = data("idle")
LOAD = data("under_load")


def judge(b, a, jb=None, ja=None):
    rb = ProbeResult(ProbeStatus.OK, 0.1, b) if b is not None else None
    ra = ProbeResult(ProbeStatus.OK, 0.1, a) if a is not None else None
    return {f.hypothesis: f for f in GpuProbe().judge(rb, ra, JudgeContext(jb or {}, ja or {}))}


def window(sm=1980, reasons=0, gen=5, deltas=None, n=50, dur=5.0):
    s = {
        "clock_sm_mhz": sm,
        "clock_mem_mhz": 3201,
        "power_mw": 600000,
        "util_gpu_pct": 99,
        "temp_c": 55,
        "pcie_gen": gen,
        "pcie_width": 16,
        "pstate": 0,
        "reasons": reasons,
    }
    end = {"violation_power_ns": 0, "pcie_replay": 2, **(deltas or {})}
    return {
        "duration_s": dur,
        "interval_s": 0.1,
        "gpus": {
            U0: summarise(
                0,
                "NVIDIA H200",
                [dict(s)] * n,
                {k: 0 if k != "pcie_replay" else 2 for k in end},
                end,
                [],
            )
        },
    }


def implicated(findings):
    return {h: f for h, f in findings.items() if f.status is H.IMPLICATED}


def test_idle_vs_idle_implicates_nothing_and_says_what_is_missing():
    f = judge(IDLE, copy.deepcopy(IDLE))
    assert implicated(f) == {}
    assert (
        f["gpu.throttling"].status is H.INCONCLUSIVE
        and "no under-load samples" in f["gpu.throttling"].summary
    )
    assert f["driver.version"].status is H.RULED_OUT and f["driver.version"].summary.startswith(
        "driver 580.159.04 on both"
    )


def test_idle_pcie_downtraining_is_not_a_finding():
    def gen1(r):
        for d in r["devices"]:
            d.update(pcie_gen_curr=1, pstate=8)

    f = judge(IDLE, data("idle", gen1))
    assert "gpu.pcie-link" not in implicated(f)
    assert "idle downtraining" in " ".join(f["gpu.pcie-link"].evidence)


def test_pcie_below_max_while_busy_is_implicated():
    f = judge(
        IDLE, IDLE, {"bench": {"telemetry": window(gen=5)}}, {"bench": {"telemetry": window(gen=3)}}
    )
    assert (
        f["gpu.pcie-link"].status is H.IMPLICATED and f["gpu.pcie-link"].severity is Severity.HIGH
    )
    assert "Gen3 x16 while busy" in f["gpu.pcie-link"].summary


def test_sw_power_cap_grown_in_the_window_is_throttling():
    before = {"bench": {"telemetry": window(sm=1980)}}
    after = {
        "bench": {
            "telemetry": window(sm=1440, reasons=4, deltas={"violation_power_ns": int(4.6e9)})
        }
    }
    f = judge(IDLE, IDLE, before, after)
    t = f["gpu.throttling"]
    assert t.status is H.IMPLICATED and t.severity is Severity.HIGH
    assert "1980 -> 1440 MHz" in t.summary and "sw power cap 0% -> 100%" in t.summary


def test_same_power_cap_on_both_sides_is_not_a_change():
    w = {"bench": {"telemetry": window(sm=1440, reasons=4)}}
    f = judge(IDLE, IDLE, w, copy.deepcopy(w))
    assert (
        f["gpu.throttling"].status is H.RULED_OUT
        and "on both sides (not a change)" in f["gpu.throttling"].summary
    )


def test_probe_sample_window_is_used_when_there_is_no_benchmark():
    b, a = copy.deepcopy(IDLE), copy.deepcopy(IDLE)
    b["sample"], a["sample"] = window(sm=1980), window(sm=1500)
    assert judge(b, a)["gpu.throttling"].status is H.IMPLICATED


def test_under_load_snapshot_without_baseline_is_low_for_sw_power_cap_only():
    t = judge(IDLE, LOAD)["gpu.throttling"]
    assert t.status is H.IMPLICATED and t.severity is Severity.LOW


def test_lowered_power_limit_is_config():
    def cap(r):
        r["devices"][0].update(enforced_power_limit_mw=500000, power_limit_mw=500000)

    c = judge(IDLE, data("idle", cap))["gpu.config"]
    assert (
        c.status is H.IMPLICATED and c.severity is Severity.HIGH and "700 W -> 500 W" in c.summary
    )


def test_new_process_is_contention_and_volatile_values_alone_are_not_findings():
    def warm(r):
        r["devices"][0].update(temp_c=60, power_mw=150000)
        r["devices"][0]["memory"]["used"] += 2 << 30

    assert implicated(judge(IDLE, data("idle", warm))) == {}

    def other(r):
        r["devices"][0]["compute_procs"] = [[777, 8 << 30]]

    c = judge(IDLE, data("idle", other))["gpu.contention"]
    assert c.status is H.IMPLICATED and c.severity is Severity.HIGH and "pid 777" in c.summary


def test_counter_growth_is_health_and_replays_in_window_are_findings():
    def ecc(r):
        r["devices"][0]["ecc_uncorrected_volatile"] = 3

    h = judge(IDLE, data("idle", ecc))["gpu.health"]
    assert h.status is H.IMPLICATED and h.severity is Severity.HIGH
    w = judge(IDLE, IDLE, {}, {"bench": {"telemetry": window(deltas={"pcie_replay": 40})}})[
        "gpu.health"
    ]
    assert w.status is H.IMPLICATED and "PCIe replays grew by 38" in w.summary


def test_nvlink_down_is_topology():
    def down(r):
        r["devices"][0]["nvlink"][3]["state"] = 0

    t = judge(IDLE, data("idle", down))["gpu.topology"]
    assert (
        t.status is H.IMPLICATED
        and t.severity is Severity.HIGH
        and "18 NVLinks active" in t.summary
    )


def test_driver_change():
    def drv(r):
        r["driver"] = "575.57.08"

    d = judge(IDLE, data("idle", drv))["driver.version"]
    assert d.status is H.IMPLICATED and "580.159.04 -> 575.57.08" in d.summary


def test_lost_gpu_is_critical():
    h = judge(
        IDLE,
        data("idle")
        | {
            "gpus": {
                **IDLE["gpus"],
                U0: {**IDLE["gpus"][U0], "name": {"missing": "gpu_lost", "detail": "GPU is lost"}},
            }
        },
    )["gpu.health"]
    assert h.status is H.IMPLICATED and h.severity is Severity.CRITICAL


def test_missing_probe_on_one_side_is_inconclusive():
    from _diffkit import section, snapshot

    from forensics.diff.ledger import analyse

    # the judge leaves a missing side to the ledger, which marks every declared hypothesis inconclusive
    assert GpuProbe().judge(None, ProbeResult(ProbeStatus.OK, 0.1, IDLE), JudgeContext()) == []
    one_side = analyse(snapshot({}), snapshot({"gpu": section(IDLE)}))
    unav = snapshot({"gpu": section({}, status="unavailable", reason="no NVIDIA driver found")})
    neither = analyse(unav, unav)
    assert len(GpuProbe.hypotheses) == 9
    for an, why in (
        (one_side, "'gpu' has no data in BEFORE (probe absent)"),
        (neither, "no NVIDIA driver"),
    ):
        by_id = {h.id: h for h in an.hypotheses}
        for hyp in GpuProbe.hypotheses:
            assert by_id[hyp].status is H.INCONCLUSIVE and why in by_id[hyp].summary, hyp


@pytest.mark.parametrize("d", [IDLE, LOAD])
def test_identical_input_implicates_nothing(d):
    w = {"bench": {"telemetry": window(sm=1440, reasons=4, deltas={"pcie_replay": 9})}}
    assert implicated(judge(d, copy.deepcopy(d), w, copy.deepcopy(w))) == {}
    assert {f.probe for f in judge(d, d).values()} == {"gpu"}


# The real snapshots taken on the 2 x H200 machine for this probe (examples/h200x2, UUIDs/serials placeholders).
EXAMPLES = ROOT / "examples" / "h200x2"


def _real(name):
    import json

    doc = json.loads((EXAMPLES / name).read_text())
    return doc, ProbeResult.from_json(doc["probes"]["gpu"])


def test_real_idle_snapshot_has_no_throttling_finding():
    doc, r = _real("gpu-idle.json")
    f = {x.hypothesis: x for x in GpuProbe().judge(r, r, JudgeContext(doc, doc))}
    assert implicated(f) == {} and f["gpu.throttling"].status is H.INCONCLUSIVE
    g = r.data["gpus"][U0]
    assert g["clocks_event_reasons"]["active"] == ["gpu_idle"]


def test_real_under_load_window_shows_sw_power_cap_time():
    doc, r = _real("gpu-under-load.json")
    w = r.data["sample"]["gpus"][U0]
    assert w["busy_samples"] >= 40 and w["reason_fraction"]["sw_power_cap"] >= 0.9
    assert (
        w["counter_deltas"]["clocks_event_sw_power_cap_ns"]
        > 0.8 * r.data["sample"]["duration_s"] * 1e9
    )
    idle_doc, idle = _real("gpu-idle.json")
    f = {x.hypothesis: x for x in GpuProbe().judge(idle, r, JudgeContext(idle_doc, doc))}
    assert (
        f["gpu.throttling"].status is H.IMPLICATED and f["gpu.throttling"].severity is Severity.LOW
    )
    assert f["gpu.health"].severity in (
        Severity.INFO,
        Severity.LOW,
    )  # NVLink CRC trickle, not an alarm
    assert "GPU 0 busy: SM 1470 MHz, sw power cap 100%" in GpuProbe().headline(r.data)
