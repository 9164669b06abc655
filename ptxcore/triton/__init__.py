"""ptxcore.triton: the Triton track (issue 16). Modules by where they run:

CPU stage and judge process (light: ast, ptxcore.sass / schema / arch; never triton or torch)
  rules.py      the rule names, descriptions and allow/deny tables
  validate.py   `validate_triton_source(source) -> TritonCheck` (pure ast; violations + @triton.jit names)
  stage.py      `triton_stage(source, arch_key) -> (CompileResult, TritonCheck)`: REJECTED / COMPILE_ERROR / COMPILED
  evidence.py   cubins of the launched kernels -> static SASS per kernel; ncu kernel-name filter; cache key

Candidate child (standard library at import; triton/torch arrive with the candidate's own imports)
  loader.py     `triton_env`, `load_candidate(path, cache_dir)`, `classify_fault(exc, path)`
  launches.py   `LaunchRecorder`: kernel binary loads and launches through Triton's runtime hooks
  session.py    `TritonSession(source, cache_dir)`: load, call (first calls recorded), `launch_report()`

Wiring (where the rest of the house uses it): the CPU stage is `ptxcore.compile.build_candidate(...,
language=triton)` -> `triton_stage` (tasks/compile.py, NoGpuJudge); the GPU judge (`GpuJudge.judge(...,
language=triton)`, ptxcore.gpu.pipeline) validates again, writes kernel.py and a private Triton cache
(`ptxcore.gpu.harness.triton.TritonFiles`), runs the child session in mode "triton" (`ptxcore.gpu.child.triton_mode`:
`TritonSession` on torch tensors, torch not blocked; `CandidateLoadError` / `CandidateCallError(.fault.status)`
come back as COMPILE_ERROR / RUNTIME_ERROR; the first call gets the start-up deadline), applies
`foreign_kernels` to CUPTI's kernel names of every call after the first instead of the mapped-library check,
and takes evidence from `launch_report()` -> `binaries_from_launches` -> `static_evidence` -> ncu with
`with_kernel_filter` (ptxcore.gpu.pipeline.triton); memcheck and ncu run the same files and cache.

This package imports nothing from ptxcore.gpu (ptxcore.gpu imports it), and its __init__ imports nothing, so
the child can import the child-side modules without pydantic.
"""
