"""Judge-side GPU state and comparison (the judge's process; torch, cupy): workload tensors and reference
outputs, the rotating buffer pool shared with the child by CUDA IPC, the fused comparisons, L2 flushes,
clock/temperature monitoring, the call driver, the child's parent side, and the external tools
(compute-sanitizer, Nsight Compute) run on built candidates."""
