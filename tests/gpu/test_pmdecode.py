"""The PM sample reader (harness.pmdecode) against cupti-python's own decode, over a fake CUPTI binding layer.

The fake holds a 'hardware buffer' of samples; its decode copies up to the image's capacity into a registry keyed
by the image's address, and the per-sample calls read them by index, as CUPTI does. The bit-for-bit check
against the real library on a real image is research/timing/decode_probe.py on the H200.
"""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from ptxcore.gpu.harness import meter as meter_mod
from ptxcore.gpu.harness.meter import GR_ACTIVE, GR_ELAPSED, SM_ELAPSED, TENSOR_ACTIVE, MeterError, drain
from ptxcore.gpu.harness.pmdecode import RawSamples, SampleReader, reader_for

METRICS = (GR_ACTIVE, GR_ELAPSED, TENSOR_ACTIVE, SM_ELAPSED)


class _Params:
    registry: dict[int, _Params] = {}
    made = 0

    def __init__(self) -> None:
        _Params.made += 1
        self.ptr = id(self)
        _Params.registry[self.ptr] = self


class FakeCupti:
    """The cupti.cupti calls the reader and the library make, over `images` (address -> decoded samples)."""

    class cuptiError(Exception):  # noqa: N801 - the binding's own name
        pass

    PM_SAMPLING_DECODE_DATA_PARAMS_STRUCT_SIZE = 1
    PM_SAMPLING_GET_COUNTER_DATA_INFO_PARAMS_STRUCT_SIZE = 2
    PM_SAMPLING_COUNTER_DATA_GET_SAMPLE_INFO_PARAMS_STRUCT_SIZE = 3
    PROFILER_HOST_EVALUATE_TO_GPU_VALUES_PARAMS_STRUCT_SIZE = 4
    PmSampling_DecodeData_Params = PmSampling_GetCounterDataInfo_Params = _Params
    PmSampling_CounterData_GetSampleInfo_Params = Profiler_Host_EvaluateToGpuValues_Params = _Params

    def __init__(self) -> None:
        self.buffer: list[tuple[int, int, tuple[float, ...]]] = []
        self.images: dict[int, tuple[int, list]] = {}
        self.calls = 0
        self.fail_decode = False

    def pm_sampling_decode_data(self, addr: int) -> None:
        p = _Params.registry[addr]
        if self.fail_decode:
            raise self.cuptiError("ERROR_OUT_OF_MEMORY")
        capacity = self.capacity[p.p_counter_data_image]
        taken, self.buffer = self.buffer[:capacity], self.buffer[capacity:]
        self.images[p.p_counter_data_image] = (capacity, taken)

    def pm_sampling_get_counter_data_info(self, addr: int) -> None:
        p = _Params.registry[addr]
        capacity, taken = self.images[p.p_counter_data_image]
        p.num_total_samples, p.num_populated_samples, p.num_completed_samples = capacity, len(taken), len(taken)

    def pm_sampling_counter_data_get_sample_info(self, addr: int) -> None:
        self.calls += 1
        p = _Params.registry[addr]
        start, end, _ = self.images[p.p_counter_data_image][1][p.sample_index]
        p.start_timestamp, p.end_timestamp = start, end

    def profiler_host_evaluate_to_gpu_values(self, addr: int) -> None:
        self.calls += 1
        p = _Params.registry[addr]
        assert p.p_host_object == "host" and p.num_metrics == len(METRICS)
        values = self.images[p.p_counter_data_image][1][p.range_index][2]
        out = self.outputs[p.p_metric_values]
        out[:] = values


class FakeHost:
    def __init__(self, chip: str, kind: object) -> None:
        self._p_host_object = None

    def initialize(self) -> None:
        self._p_host_object = "host"

    def deinitialize(self) -> None:
        self._p_host_object = None


class FakeCollector:
    """cupti-python's Collector as the reader (private fields) and the library path (`decode`) use it."""

    def __init__(self, cc: FakeCupti, metrics=METRICS) -> None:
        self._cc, self._metrics, self._chip_name, self._pm_sampling_object = cc, list(metrics), "GH100", 7

    def _create_counter_data_image(self, max_samples: int) -> np.ndarray:
        image = np.zeros(16, dtype=np.uint8)
        self._cc.capacity[image.ctypes.data] = max_samples
        self._keep.append(image)
        return image

    def decode(self, max_samples: int):
        """The library's decode and CounterData: the same samples, read with fresh structs."""
        cap = max_samples
        taken, self._cc.buffer = self._cc.buffer[:cap], self._cc.buffer[cap:]
        data = [types.SimpleNamespace(start_timestamp=s, end_timestamp=e, metric_values=list(v)) for s, e, v in taken]
        counter = types.SimpleNamespace(num_total_samples=cap, num_populated_samples=len(taken),
                                        num_completed_samples=len(taken))
        return _Data(data, counter)


class _Data(list):
    def __init__(self, rows, counts) -> None:
        super().__init__(rows)
        self.__dict__.update(vars(counts))


@pytest.fixture
def fake_cupti(monkeypatch):
    cc = FakeCupti()
    cc.capacity, cc.outputs = {}, {}
    FakeCollector._keep = []
    real_zeros = np.zeros

    def zeros(n, dtype=None):  # the reader's output array, registered by address for the fake's evaluate
        arr = real_zeros(n, dtype=dtype)
        cc.outputs[arr.ctypes.data] = arr
        return arr

    pkg = types.ModuleType("cupti")
    pkg.cupti = cc
    pkg.profiler_host = types.SimpleNamespace(ProfilerHost=FakeHost, ProfilerType=types.SimpleNamespace(PM_SAMPLING=1))
    pkg.utils = types.SimpleNamespace(metrics_to_c_array=lambda names: (list(names), "names"))
    monkeypatch.setitem(sys.modules, "cupti", pkg)
    monkeypatch.setitem(sys.modules, "cupti.cupti", cc)
    monkeypatch.setitem(sys.modules, "cupti.profiler_host", pkg.profiler_host)
    monkeypatch.setitem(sys.modules, "cupti.utils", pkg.utils)
    monkeypatch.setattr(np, "zeros", zeros)
    return cc


def _fill(cc: FakeCupti, n: int) -> None:
    cc.buffer = [(1000 + 10 * i, 1010 + 10 * i, (float(i % 7), 7.0, float(i % 3), 9.0)) for i in range(n)]


def test_the_reader_gives_the_librarys_samples_and_counts(fake_cupti):
    _fill(fake_cupti, 2_500)
    fast = drain(FakeCollector(fake_cupti), 1_000, METRICS, reader_for(FakeCollector(fake_cupti), METRICS))
    _fill(fake_cupti, 2_500)
    slow = drain(FakeCollector(fake_cupti), 1_000, METRICS)
    assert fast[0] == slow[0] and len(fast[0]) == 2_500
    assert (fast[1].total, fast[1].populated, fast[1].completed) == (slow[1].total, slow[1].populated,
                                                                     slow[1].completed) == (3_000, 2_500, 2_500)
    assert fast[0][8].busy_ns == pytest.approx(10 * 1 / 7) and fast[0][8].tensor_ns == pytest.approx(10 * 2 / 9)


def test_the_reader_makes_its_structs_once_per_decode_not_per_sample(fake_cupti):
    reader = SampleReader(FakeCollector(fake_cupti), METRICS)
    _fill(fake_cupti, 5_000)
    _Params.made = 0
    raw = reader.read(10_000)
    assert raw.completed == 5_000 and fake_cupti.calls == 10_000
    assert _Params.made == 4  # decode, info, sample info, evaluate
    assert raw.values[3] == (3.0, 7.0, 0.0, 9.0) and (raw.starts[3], raw.ends[3]) == (1030, 1040)


def test_a_refused_decode_is_a_meter_error_not_an_empty_trace(fake_cupti):
    col = FakeCollector(fake_cupti)
    reader = reader_for(col, METRICS)
    fake_cupti.fail_decode = True
    with pytest.raises(MeterError, match="decode failed: DecodeFailed"):
        drain(col, 1_000, METRICS, reader)


def test_without_the_private_fields_or_another_configuration_the_library_decodes(fake_cupti):
    col = FakeCollector(fake_cupti)
    del col._pm_sampling_object
    assert reader_for(col, METRICS) is None
    other = FakeCollector(fake_cupti, metrics=(GR_ACTIVE, GR_ELAPSED))
    assert reader_for(other, METRICS) is None  # configured with another metric set


def test_a_sample_needs_its_timestamps_and_values():
    with pytest.raises(ValueError, match="timestamps and its values"):
        RawSamples(10, 2, 2, (1, 2), (3,), ((1.0,), (2.0,)), 0.0, 0.0)


def test_the_meter_makes_a_reader_per_configuration_and_ends_it_with_the_collector(fake_cupti, monkeypatch):
    made = []

    def counting(col, metrics):
        made.append(metrics)
        return reader_for(col, metrics)

    monkeypatch.setattr(meter_mod, "reader_for", counting)
    m = meter_mod.PmSamplingMeter.__new__(meter_mod.PmSamplingMeter)
    m._reader, m._collector, m.metrics, m.interval_ns = None, None, (), 0
    col = FakeCollector(fake_cupti)
    m._read_with(col, METRICS)
    first = m._reader._host
    m._read_with(col, METRICS)
    assert len(made) == 2 and first._p_host_object is None  # the first reader's host ended with it
    host = m._reader._host
    m.close()
    assert host._p_host_object is None and m._reader is None


def test_a_second_configuration_gets_a_fresh_collector(monkeypatch):
    """Configuring an enabled collector again segfaulted in its next decode on the H200: the meter closes and
    reopens it first."""
    events = []
    m = meter_mod.PmSamplingMeter.__new__(meter_mod.PmSamplingMeter)
    m._reader, m.metrics, m.interval_ns = None, (), 0

    class Col:
        def configure(self, **kw) -> None:
            events.append(("configure", kw["sampling_interval"]))

        def disable(self) -> None:
            events.append("disable")

    m._collector = Col()
    monkeypatch.setattr(m, "open", lambda: (events.append("enable"), setattr(m, "_collector", Col())))
    monkeypatch.setattr(meter_mod, "reader_for", lambda col, metrics: None)
    m.configure(30_000)
    m.configure(8_000)
    assert events == [("configure", 30_000), "disable", "enable", ("configure", 8_000)]
    assert m.interval_ns == 8_000
