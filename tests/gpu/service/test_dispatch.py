"""Dispatch decisions: memory fit, resident workload state, load by others, retries elsewhere."""

from __future__ import annotations

import threading

from ptxcore.gpu.service.dispatch import Dispatcher, LaneSnapshot, QueuedTask, plan
from ptxcore.gpu.service.memory import memory_need
from ptxcore.problems import get_problem

GIB = 1 << 30


def lane(gpu, free_gib=70, total_gib=80, busy=False, accepting=True, resident=None, util=0, external_gib=0):
    return LaneSnapshot(gpu=gpu, accepting=accepting, busy=busy, free_bytes=int(free_gib * GIB),
                        total_bytes=int(total_gib * GIB), resident=resident or {}, utilization_pct=util,
                        external_bytes=int(external_gib * GIB))


def task(tid, key="gemm/w", state_gib=1, transient_gib=1, excluded=()):
    return QueuedTask(tid, key, int(state_gib * GIB), int(transient_gib * GIB), excluded_gpus=frozenset(excluded))


def test_prefers_the_gpu_that_holds_the_workload_state():
    lanes = [lane(0, free_gib=70), lane(1, free_gib=40, resident={"gemm/w": GIB})]
    assert plan([task("a")], lanes).assignments == (("a", 1),)


def test_without_resident_state_prefers_the_less_loaded_gpu_over_more_free_memory():
    lanes = [lane(0, free_gib=70, util=90), lane(1, free_gib=40, util=0)]
    assert plan([task("a")], lanes).assignments == (("a", 1),)


def test_equal_load_goes_to_more_free_memory_not_to_the_lowest_index():
    lanes = [lane(0, free_gib=20), lane(1, free_gib=60)]
    assert plan([task("a")], lanes).assignments == (("a", 1),)


def test_a_task_that_does_not_fit_waits_while_smaller_ones_proceed():
    lanes = [lane(0, free_gib=10, total_gib=80)]
    pending = [task("big", state_gib=30, transient_gib=20), task("small")]
    result = plan(pending, lanes)
    assert result.assignments == (("small", 0),)
    assert result.impossible == ()


def test_evictable_cached_state_counts_as_free_but_costs_preference():
    lanes = [lane(0, free_gib=5, resident={"other/w": 40 * GIB}), lane(1, free_gib=30)]
    assert plan([task("a", state_gib=10, transient_gib=10)], lanes).assignments == (("a", 1),)
    only = [lane(0, free_gib=5, resident={"other/w": 40 * GIB})]
    assert plan([task("a", state_gib=10, transient_gib=10)], only).assignments == (("a", 0),)


def test_a_task_larger_than_any_gpu_is_impossible_only_once_memory_is_known():
    huge = task("huge", state_gib=100, transient_gib=10)
    assert plan([huge], [lane(0), lane(1)]).impossible == ("huge",)
    unknown = LaneSnapshot(gpu=2, accepting=False, busy=False, free_bytes=0, total_bytes=0)
    assert plan([huge], [lane(0), unknown]).impossible == ()


def test_busy_drained_and_excluded_gpus():
    assert plan([task("a")], [lane(0, busy=True), lane(1, accepting=False)]).assignments == ()
    retried = task("a", excluded={0})
    assert plan([retried], [lane(0), lane(1)]).assignments == (("a", 1),)
    # the other GPU is busy: wait for it rather than retry where the task failed
    assert plan([retried], [lane(0), lane(1, busy=True)]).assignments == ()
    # the other GPU is drained (elsewhere is not possible now): retry here rather than starve
    assert plan([retried], [lane(0), lane(1, accepting=False)]).assignments == (("a", 0),)
    # a single-GPU host: retry on the same GPU
    assert plan([retried], [lane(0)]).assignments == (("a", 0),)


def test_fifo_order_and_one_task_per_idle_gpu():
    result = plan([task("a"), task("b"), task("c")], [lane(0), lane(1, free_gib=60)])
    assert [t for t, _ in result.assignments] == ["a", "b"]
    assert {g for _, g in result.assignments} == {0, 1}


def test_unknown_memory_fits():
    fresh = LaneSnapshot(gpu=0, accepting=True, busy=False, free_bytes=0, total_bytes=0)
    assert plan([task("a")], [fresh]).assignments == (("a", 0),)


def test_dispatcher_hands_tasks_only_to_idle_accepting_lanes_and_late_binds():
    d = Dispatcher([0, 1])
    d.update_lane(lane(0))
    d.update_lane(lane(1, accepting=False))
    d.submit(task("a"))
    d.submit(task("b"))
    got = d.next_task(0, timeout_s=1)
    assert got.task_id == "a"
    # lane 0 is now busy until it publishes again; lane 1 is drained: b waits (no per-GPU queue)
    assert d.next_task(0, timeout_s=0.1) is None
    assert d.pending_count() == 1
    d.update_lane(lane(1))
    assert d.next_task(1, timeout_s=1).task_id == "b"


def test_dispatcher_wakes_a_blocked_lane_and_reclaims_undelivered_work():
    d = Dispatcher([0])
    d.update_lane(lane(0))
    got = []
    t = threading.Thread(target=lambda: got.append(d.next_task(0, timeout_s=5)))
    t.start()
    d.submit(task("a"))
    t.join(5)
    assert got and got[0].task_id == "a"
    d.update_lane(lane(0))
    d.submit(task("b"))  # assigned to lane 0's mailbox
    d.update_lane(lane(0, accepting=False))
    d.reclaim(0)
    assert d.pending_count() == 1
    assert d.next_task(0, timeout_s=0.1) is None


def test_impossible_tasks_are_reported():
    d = Dispatcher([0])
    dropped = []
    d.on_impossible = dropped.append
    d.update_lane(lane(0))
    d.submit(task("huge", state_gib=100))
    assert [t.task_id for t in dropped] == ["huge"]


def test_memory_need_from_the_definition_shapes():
    need = memory_need(get_problem("gemm_n7168_k5120"), None)
    # A[8192,5120] + B[7168,5120] + C[8192,7168], bf16
    expected_state = 2 * (8192 * 5120 + 7168 * 5120 + 8192 * 7168)
    assert need.state_bytes == expected_state
    assert need.transient_bytes > 2 * 8192 * 7168
    assert need.state_key.startswith("gemm_n7168_k5120/")
