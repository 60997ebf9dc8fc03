"""dpcert benchmarks: tightness and speed suite (``python -m benchmarks``), plots, published claims."""
