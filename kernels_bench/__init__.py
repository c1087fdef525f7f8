"""kernels_bench: labelled GPU workloads (ground truth for the classifier) and kernel benchmarks.

Needs torch with CUDA at run time (the ``bench`` extra); importing the package needs neither.
"""
