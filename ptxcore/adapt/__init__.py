"""Adaptation data engine (paper Section 3): Fixit / KernelGen data and repair-notes retrieval. Pure library code."""
