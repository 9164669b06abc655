"""Judge backends: none (CPU stages only), local GPU, profiling service, plugin, recorded verdicts."""
