"""Arbitrated correctness wired into the session (issue 25), on CPU tensors: the correctness calls a library
comparison failed go through `arbitrate_calls`, whose trials ruled exact pass `correctness_verdict`, and whose
corrected references the later calls are compared against.

Rules stated here:
- an exact kernel whose library reference is inexact at a few elements passes, with a record that says so;
- a wrong kernel still fails, arbitrated (KERNEL_INEXACT) or not (over the cap: NOT_ARBITRATED, naming the cap);
- only the slices holding disputed elements are recomputed; over the cap nothing is;
- outputs that changed after they were compared, or a NaN, are never arbitrated: the verdict stands.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from ptxcore.gpu.harness.calls import CallDriver, CallRecord, Tolerance  # noqa: E402
from ptxcore.gpu.harness.compare import compare_numpy  # noqa: E402
from ptxcore.gpu.harness.state import TrialData, digest  # noqa: E402
from ptxcore.gpu.pipeline import arbitration  # noqa: E402
from ptxcore.gpu.pipeline.arbitration import Limits, arbitrate_calls  # noqa: E402
from ptxcore.gpu.pipeline.verdicts import correctness_verdict  # noqa: E402
from ptxcore.problems import get_problem  # noqa: E402
from ptxcore.schema import ArbitrationOutcome, EvaluationStatus  # noqa: E402

GEMM = get_problem("gemm_n7168_k5120")
TOL = Tolerance(1e-2, 1e-2, 1.0)
M, N, K = 12, 10, 16
OFF = [(1, 3), (1, 7), (5, 0)]
"""Where the library's C is off: rows 1 and 5."""


def _trial(seed: int) -> tuple[TrialData, torch.Tensor]:
    """One trial's inputs, the float64 C, and a library reference 0.5 off (abs and rel > 1e-2) at OFF."""
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=gen).bfloat16()
    b = torch.randn(N, K, generator=gen).bfloat16()
    exact = a.double() @ b.double().T
    library = exact.clone()
    for i, j in OFF:
        library[i, j] += 0.5 if exact[i, j] >= 0 else -0.5
    return TrialData(seed, {"A": a, "B": b}, {"C": library.bfloat16()}), exact


def _record(trial: int, data: TrialData, out: torch.Tensor) -> CallRecord:
    """A correctness call as the driver leaves it: compared with the library, its output fingerprinted."""
    rec = CallRecord(trial, "correctness", trial, 0)
    rec.per_output = {"C": compare_numpy(out.double().numpy(), data.references["C"].double().numpy(), TOL.atol,
                                         TOL.rtol)}
    rec.stats, rec.digests = rec.per_output["C"], {"C": digest(out)}
    return rec


def _session(kernels: list[torch.Tensor], trials: list[TrialData], limits: Limits = Limits()):
    recs = [_record(t, trials[t], kernels[t]) for t in range(len(trials))]
    ruled = arbitrate_calls(GEMM, recs, lambda t: {"C": kernels[t]}, trials, TOL, limits)
    return recs, ruled


def test_an_exact_kernel_passes_where_the_library_is_inexact_with_its_record():
    (data, exact), (data1, exact1) = _trial(1), _trial(2)
    library = data.references["C"]
    library.view(torch.int16)[0:2, 0] += 1  # one bf16 ulp (rel < 1e-2) off in rows 0 and 1: no dispute there
    kernels = [exact.bfloat16(), exact1.bfloat16()]
    recs, ruled = _session(kernels, [data, data1])
    assert correctness_verdict(recs, TOL).status is EvaluationStatus.INCORRECT_NUMERICAL  # the library alone
    assert correctness_verdict(recs, TOL, ruled.exact_trials) is None and ruled.exact_trials == {0, 1}
    a = ruled.arbitrations[0]
    assert a.outcome is ArbitrationOutcome.KERNEL_EXACT and a.inexact == ["library"] and a.trial == 0
    assert a.reference_corrected and a.outputs[0].disputed == 3 and a.outputs[0].library_mismatches == 3
    assert a.outputs[0].kernel_max_abs_error < 0.05 < a.outputs[0].library_max_abs_error
    assert sorted(tuple(e.index) for e in a.elements) == OFF
    fixed = ruled.references[0]["C"]
    assert fixed is not library and torch.equal(fixed[[1, 5]], exact.bfloat16()[[1, 5]])  # whole rows: float64
    assert torch.equal(fixed[0], library[0]) and not torch.equal(fixed[1], library[1])  # other rows: the library
    assert torch.equal(data.references["C"][1, 3], (exact[1, 3] + 0.5 * exact[1, 3].sign()).bfloat16())  # intact


def test_a_wrong_kernel_still_fails():
    """The kernel off where the library is right: disputed, recomputed, and the kernel is the inexact side."""
    data, exact = _trial(3)
    data = TrialData(3, data.inputs, {"C": exact.bfloat16()})
    wrong = exact.clone()
    wrong[2, 2] += 1.0
    recs, ruled = _session([wrong.bfloat16()], [data])
    (a,) = ruled.arbitrations
    assert a.outcome is ArbitrationOutcome.KERNEL_INEXACT and a.inexact == ["kernel"] and not a.reference_corrected
    assert ruled.exact_trials == frozenset() and ruled.references == {}
    assert correctness_verdict(recs, TOL, ruled.exact_trials).status is EvaluationStatus.INCORRECT_NUMERICAL


def test_only_the_disputed_rows_are_recomputed(monkeypatch):
    seen = []
    real = arbitration.recompute
    monkeypatch.setattr(arbitration, "recompute", lambda p, inputs: seen.append(inputs["A"].shape) or real(p, inputs))
    data, exact = _trial(4)
    _, ruled = _session([exact.bfloat16()], [data])
    assert seen == [torch.Size([2, K])]  # rows 1 and 5 of A, not M
    assert ruled.arbitrations[0].slices == ["rows 1, 5 of C"]


def test_over_the_cap_nothing_is_recomputed_and_the_verdict_stands(monkeypatch):
    monkeypatch.setattr(arbitration, "recompute", lambda *a: pytest.fail("recomputed over the cap"))
    data, exact = _trial(5)
    wrong_layout = exact.bfloat16().T.contiguous().reshape(M, N)  # control 05's mistake: every row wrong
    recs, ruled = _session([wrong_layout], [data], Limits(max_disputed=8))
    (a,) = ruled.arbitrations
    assert a.outcome is ArbitrationOutcome.NOT_ARBITRATED and "(at most 8 are arbitrated)" in a.reason
    assert correctness_verdict(recs, TOL, ruled.exact_trials).status is EvaluationStatus.INCORRECT_NUMERICAL
    data, exact = _trial(6)
    recs, ruled = _session([exact.bfloat16()], [data], Limits(max_units=1))  # 2 rows hold disputes, 1 allowed
    (a,) = ruled.arbitrations
    assert a.outcome is ArbitrationOutcome.NOT_ARBITRATED and "2 rows of C" in a.reason


def test_changed_outputs_and_nan_are_not_arbitrated():
    data, exact = _trial(7)
    kernel = exact.bfloat16()
    rec = _record(0, data, kernel)
    later = kernel.clone()
    later[0, 0] += 1.0  # the candidate's process rewrote its output after the comparison
    ruled = arbitrate_calls(GEMM, [rec], lambda t: {"C": later}, [data], TOL)
    assert "output C changed after the call was compared" in ruled.arbitrations[0].reason
    assert ruled.exact_trials == frozenset()
    nan = kernel.clone()
    nan[3, 3] = float("nan")
    _, ruled = _session([nan], [data])
    assert ruled.arbitrations[0].outcome is ArbitrationOutcome.NOT_ARBITRATED and "NaN" in ruled.arbitrations[0].reason


def test_the_first_call_not_ruled_exact_ends_the_arbitration():
    (d0, e0), (d1, e1), (d2, e2) = _trial(8), _trial(9), _trial(10)
    wrong = e1.clone()
    wrong[1, 3] = -wrong[1, 3]
    recs, ruled = _session([e0.bfloat16(), wrong.bfloat16(), e2.bfloat16()], [d0, d1, d2])
    assert [a.trial for a in ruled.arbitrations] == [0, 1] and ruled.exact_trials == {0}
    assert correctness_verdict(recs, TOL, ruled.exact_trials).status is EvaluationStatus.INCORRECT_NUMERICAL


def test_the_driver_compares_later_calls_with_the_corrected_reference_and_fingerprints_correctness_calls():
    data, exact = _trial(11)
    fixed = {"C": exact.bfloat16()}
    drv = CallDriver.__new__(CallDriver)  # no GPU: the comparison itself is replaced
    info = SimpleNamespace(name="C")
    drv.state, drv._last_perm, drv._keep = SimpleNamespace(spec=SimpleNamespace(outputs=[info])), {}, []
    compared = []
    drv._compare = lambda out, ref, t, perm: compared.append(ref) or len(compared)
    slot = SimpleNamespace(buffers={"C": SimpleNamespace(tensor=exact.bfloat16())})
    first = CallRecord(0, "correctness", 0, 0)
    drv.references = {}
    drv._queue_compare(first, slot, data, None)
    assert compared[-1] is data.references["C"] and int(first.digests["C"]) == int(digest(exact.bfloat16()))
    drv.references = {0: fixed}
    timed = CallRecord(1, "timed", 0, 0)
    drv._queue_compare(timed, slot, data, None)
    assert compared[-2] is compared[-1] is fixed["C"] and timed.digests == {}  # the call and its stale check
