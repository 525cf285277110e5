"""The compute layer: the arithmetic every family and backend shares, below both.

Encoded rows and row weights (:mod:`~mixfold.compute.encoded`), the one fold loop
(:mod:`~mixfold.compute.fold`), the shard payload (:mod:`~mixfold.compute.payload`) and the one
tree reduction (:mod:`~mixfold.compute.tree`), row-block threads
(:mod:`~mixfold.compute.row_blocks`), the fused linear E-step on NumPy and torch
(:mod:`~mixfold.compute.linear`, :mod:`~mixfold.compute.linear_torch`), stable log-space helpers
(:mod:`~mixfold.compute.logspace`) and the compiled kernels (:mod:`~mixfold.compute.kernels`).
It imports only the contracts (errors, capabilities, precision) below it.
"""
