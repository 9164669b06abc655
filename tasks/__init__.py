"""Thin Prefect tasks: each calls one ptxcore function and returns a schema object."""
