"""research.kernels.mha_bwd: ncu's CSV pages -> the per-kernel table, and the ncu command lines (no GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from research.kernels.mha_bwd import profile_ncu
from research.kernels.mha_bwd.ncu_report import (
    format_table,
    merge,
    parse_details,
    parse_raw,
    short_name,
    summarize,
)

HEAD = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
        '"Device","CC"')


def _detail(kid: str, kernel: str, block: str, grid: str, section: str, name: str, unit: str, value: str) -> str:
    return (f'"{kid}","4242","python3.11","h200","{kernel}","1","7","{block}","{grid}","0","9.0",'
            f'"{section}","{name}","{unit}","{value}"')


DKDV = "void bwd_dkdv<false>(const __nv_bfloat16 *, const float *, int)"
CUDNN = "cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_6_64x128x128_4x1x1_kernel0_0"
SOL, LAUNCH, OCC = "GPU Speed Of Light Throughput", "Launch Statistics", "Occupancy"
DETAILS = "\n".join([
    "==PROF== Connected to process 4242",  # ncu's own lines before the CSV are skipped
    HEAD + ',"Section Name","Metric Name","Metric Unit","Metric Value"',
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", SOL, "Duration", "us", "1,234.56"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", SOL, "Compute (SM) Throughput", "%", "61.25"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", SOL, "DRAM Throughput", "%", "12.5"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", LAUNCH, "Registers Per Thread", "register/thread", "168"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", LAUNCH, "Dynamic Shared Memory Per Block", "Kbyte/block",
            "204.8"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", LAUNCH, "Cluster Scheduling Policy", "", "Spread"),
    _detail("0", DKDV, "(384, 1, 1)", "(32, 192, 1)", OCC, "Achieved Occupancy", "%", "18.71"),
    _detail("1", CUDNN, "(256, 1, 1)", "(132, 1, 1)", SOL, "Duration", "ms", "1.5"),
    _detail("1", CUDNN, "(256, 1, 1)", "(132, 1, 1)", LAUNCH, "Dynamic Shared Memory Per Block", "byte/block",
            "2,048"),
    "",
])
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
GMMA = "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
RAW_METRICS = ["gpu__time_duration.sum", GMMA, *(STALL.format(r) for r in
               ("barrier", "long_scoreboard", "selected", "gmma", "wait"))]
RAW = "\n".join([
    HEAD + "," + ",".join(f'"{m}"' for m in RAW_METRICS),
    '"","","","","","","","","","",""' + ',"ns","%","ratio","ratio","ratio","ratio","ratio"',
    f'"0","4242","python3.11","h200","{DKDV}","1","7","(384, 1, 1)","(32, 192, 1)","0","9.0",'
    '"9,999,999","47.3","4.25","0.75","1.00","2.5","1.5"',
    f'"1","4242","python3.11","h200","{CUDNN}","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0",'
    '"1,500,000","71.8","0.5","3.25","1.00","1.75","0.25"',
])


def test_details_rows_group_by_launch_with_numbers_and_text():
    launches = parse_details(DETAILS)
    assert [k.id for k in launches] == ["0", "1"]
    dkdv = launches[0]
    assert (dkdv.name, dkdv.block, dkdv.grid) == (DKDV, "(384, 1, 1)", "(32, 192, 1)")
    assert dkdv.metrics["Duration"].value == pytest.approx(1234.56)  # the thousands separator dropped
    assert dkdv.metrics["Duration"].unit == "us"
    assert dkdv.metrics["Cluster Scheduling Policy"].value == "Spread"
    assert parse_details("no csv here") == []


def test_a_summary_row_converts_units_and_leaves_missing_metrics_empty():
    dkdv, cudnn = (summarize(k) for k in parse_details(DETAILS))
    assert dkdv.duration_us == pytest.approx(1234.56)
    assert (dkdv.sm_pct, dkdv.dram_pct, dkdv.occupancy_pct, dkdv.registers) == (61.25, 12.5, 18.71, 168.0)
    assert dkdv.dyn_smem_kib == pytest.approx(204800 / 1024)  # ncu's Kbyte is 1000 bytes
    assert dkdv.tensor_pct is None and dkdv.stalls == ()  # only on the raw page
    assert cudnn.duration_us == pytest.approx(1500.0)  # ms
    assert cudnn.dyn_smem_kib == pytest.approx(2.0)
    assert cudnn.sm_pct is None


def test_the_raw_page_adds_the_tensor_pipe_and_the_top_three_stalls():
    raw = parse_raw(RAW)
    assert raw[0].metrics["gpu__time_duration.sum"].unit == "ns"
    dkdv, cudnn = (summarize(k) for k in merge(parse_details(DETAILS), raw))
    assert dkdv.duration_us == pytest.approx(1234.56)  # the details label wins over the raw name
    assert dkdv.tensor_pct == pytest.approx(47.3)
    assert dkdv.stalls == (("barrier", 4.25), ("gmma", 2.5), ("wait", 1.5))  # "selected" is no stall
    assert cudnn.stalls == (("long_scoreboard", 3.25), ("gmma", 1.75), ("barrier", 0.5))
    only_raw = summarize(parse_raw(RAW)[1])
    assert only_raw.duration_us == pytest.approx(1500.0)  # ns from the raw page alone


def test_short_names_drop_templates_and_arguments_and_keep_both_ends():
    assert short_name(DKDV) == "bwd_dkdv<…>"
    assert short_name("void flash::bwd_kernel<cute::tuple<int>>(Params)") == "bwd_kernel<…>"
    cut = short_name(CUDNN, width=40)
    assert len(cut) == 40 and cut.startswith("cudnn_generated_") and cut.endswith("4x1x1_kernel0_0")


def test_the_table_has_one_line_per_launch_and_the_total():
    rows = [summarize(k) for k in merge(parse_details(DETAILS), parse_raw(RAW))]
    lines = format_table("== candidate", rows).splitlines()
    assert lines[0] == "== candidate"
    assert lines[1].split()[:4] == ["kernel", "us", "SM%", "DRAM%"]
    assert lines[3].startswith("bwd_dkdv<…>") and "1,234.6" in lines[3] and "barrier 4.25, gmma 2.50" in lines[3]
    assert "(32, 192, 1)" in lines[3] and " 168 " in lines[3]
    assert lines[4].split()[2] == "-"  # cuDNN's row has no SM throughput in the sample
    assert lines[-1] == "total 2,734.6 us over 2 kernel launch(es)"


def test_the_profile_command_covers_one_nvtx_range_and_exports_the_report(tmp_path: Path):
    app = profile_ncu.candidate_argv(Path("/b/kernel.so"), "mha_bwd_d128", "uuid-1", 7, 0)
    assert app == [sys.executable, "-m", "ptxcore.gpu.child", "profile", "--library", "/b/kernel.so",
                   "--problem", "mha_bwd_d128", "--workload", "uuid-1", "--seed", "7", "--device", "0",
                   "--calls", "3"]
    report = tmp_path / "candidate.ncu-rep"
    cmd = profile_ncu.ncu_profile_command("/opt/ncu", app, report)
    assert cmd[0] == "/opt/ncu" and cmd[-len(app):] == app
    flags = cmd[1:-len(app)]
    assert flags[:2] == ["--set", "full"]
    assert flags[flags.index("--metrics") + 1] == GMMA
    assert [flags[i + 1] for i, f in enumerate(flags) if f == "--nvtx-include"] == ["ptxbench_call/", "ptxbench_call]"]
    assert "--nvtx" in flags and flags[flags.index("--export") + 1] == str(report)
    some = profile_ncu.ncu_profile_command("ncu", app, report, sections=("SpeedOfLight", "WarpStateStats"), metrics=())
    assert "--set" not in some and "--metrics" not in some
    assert some[1:5] == ["--section", "SpeedOfLight", "--section", "WarpStateStats"]
    assert profile_ncu.ncu_import_command("ncu", report, "raw") == [
        "ncu", "--import", str(report), "--csv", "--page", "raw", "--print-units", "base"]


def test_the_cudnn_side_runs_the_driver_module():
    app = profile_ncu.cudnn_argv("mha_bwd_d128_causal", "uuid-2", 9, 1)
    assert app[1:3] == ["-m", "research.kernels.mha_bwd.cudnn_driver"]
    assert app[3:] == ["--problem", "mha_bwd_d128_causal", "--workload", "uuid-2", "--seed", "9", "--device", "1",
                       "--warmup", "3"]


def test_no_ncu_is_one_line_on_stderr_and_a_failure(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("PTXBENCH_NCU", str(tmp_path / "no-ncu"))
    rc = profile_ncu.main(["--kernel", "solutions/mha_bwd_d128/wgmma_tma_ws.cu", "--problem", "mha_bwd_d128",
                           "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1 and err == [f"profile_ncu: ncu not found at PTXBENCH_NCU={tmp_path / 'no-ncu'}"]
    assert not (tmp_path / "out").exists()  # nothing built or written before ncu is known


FAKE_NCU = """#!{python}
import sys
from pathlib import Path
a = sys.argv[1:]
here = Path(sys.argv[0]).parent
if "--import" in a:
    print((here / (a[a.index("--page") + 1] + ".csv")).read_text())
elif "--metrics" in a:
    sys.exit("==ERROR== Failed to find metric " + a[a.index("--metrics") + 1])
else:
    Path(a[a.index("--export") + 1]).write_text("report")
"""


def test_a_side_is_profiled_read_back_and_retried_without_a_refused_metric(tmp_path: Path):
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(0o755)
    (tmp_path / "details.csv").write_text(DETAILS)
    (tmp_path / "raw.csv").write_text(RAW)
    out = tmp_path / "out"
    out.mkdir()
    launches = profile_ncu.profile_side(str(ncu), "cudnn", ["app"], out, 30.0, (), (GMMA,))
    assert [summarize(k).name for k in launches] == ["bwd_dkdv<…>", short_name(CUDNN)]
    assert summarize(launches[0]).tensor_pct == pytest.approx(47.3)
    assert (out / "cudnn.details.csv").read_text() == DETAILS + "\n"
    assert (out / "cudnn.ncu-rep").is_file()
    (tmp_path / "details.csv").write_text("")
    (tmp_path / "raw.csv").write_text("")
    with pytest.raises(profile_ncu.ProfileError, match="report has no kernel"):
        profile_ncu.profile_side(str(ncu), "cudnn", ["app"], out, 30.0, (), ())
