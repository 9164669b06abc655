"""The judge pipeline (the judge's process): the stages of one judgement on a GPU — library check,
correctness, memcheck gate, verified timing, target-instruction evidence — and the JudgeResult they fold
into. `GpuJudge` is its entry; the profiling service drives the same public stage methods."""
