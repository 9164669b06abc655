"""`python -m ptxcore.gpu.child`: the candidate's process (session, sanitize or profile).

It ends with os._exit once main has returned and the standard streams are flushed: no interpreter teardown, no
atexit handler and no static destructor of the candidate's library runs after its last request. On the H200
(2026-12-04, research/timing/ncu_phases.py, the GEMM) the teardown was 0.62 s of a plain run's end, and ncu's run
ended 0.71 s sooner (2.02 -> 1.31 s from the request) and memcheck's 0.47 s sooner (0.99 -> 0.51 s), with the same
counts and the same clean gate. Everything the judge reads was written before (replies, the tools' reports).
"""

import os
import sys

from ptxcore.gpu.child.main import main

code = main()
sys.stdout.flush()
sys.stderr.flush()
os._exit(code if isinstance(code, int) else 1)
