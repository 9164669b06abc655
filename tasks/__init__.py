"""Thin Prefect tasks: each calls one ptxcore function and returns a schema object.

generate (LLM call, tag llm:<provider>), compile (nvcc on a CPU worker, tag compile), judge (GPU judge,
tag gpu:<arch>, retried only for infrastructure errors) and record (hands a record to the single writer).
"""
