"""Precision studies of the attention-backward kernels (the dS rounding); see research/README.md."""
