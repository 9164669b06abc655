"""The candidate child: the process that loads and runs one candidate (or the trusted baseline).

Runs where the candidate runs, so it stays light: stdlib (ctypes driver calls, DLPack), tvm_ffi and CUPTI
in session mode; torch only in the standalone memcheck / ncu modes. Nothing here decides a verdict: the
judge reads the outputs itself (harness) and folds every observation (pipeline).

    python -m ptxcore.gpu.child session|sanitize|profile ...
"""
