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

Wiring (judge side): CPU stage `triton_stage`; child mode "triton" = `TritonSession` on torch tensors (torch not
blocked), its faults are `CandidateLoadError` / `CandidateCallError(.fault.status)`; after the first calls
`launch_report()` -> `evidence.binaries_from_launches` -> `static_evidence` -> ncu through
`with_kernel_filter(ncu_command(...), kernels)`; CUPTI names of a call vs `foreign_kernels`. The first call
compiles: give it a longer deadline. Share one Triton cache dir between a candidate's children.

This package imports nothing from ptxcore.gpu (ptxcore.gpu imports it), and its __init__ imports nothing, so
the child can import the child-side modules without pydantic.
"""
