"""CPU models of the Hopper semantics the solutions/*.cu kernels rely on, and readers of their source.

The model tests in tests/solutions/ port each kernel's index maths to Python and replay it against
these models; see research/README.md.
"""
