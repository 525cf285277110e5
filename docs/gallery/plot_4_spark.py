"""
The same fit on Spark
=====================

The customer segmentation of the first example, run on a local Spark session (``local[2]``)
instead of in this process. The rows are encoded once and cached on the executors; each
iteration sends the model out and brings one payload of sufficient statistics per partition
back through ``treeAggregate``. Same seed, same start: the two fits agree to round-off.

Needs ``pip install "mixfold[spark]"`` (PySpark and a Java runtime).
"""

# %%
# Fit on the local backend, then on Spark
# ---------------------------------------
import matplotlib.pyplot as plt
import numpy as np

import mixfold
from mixfold.examples.customers import customer_estimator, load_customers

rows = load_customers()[:1000]  # a small table: the point is the engine, not the size
options = dict(seed=0, tol=1e-8, max_iter=200, progress=False)
local = mixfold.optimize(rows, customer_estimator(3), backend="local", **options)
spark = mixfold.optimize(rows, customer_estimator(3), backend="spark", **options)
a, b = local.fit_result.log_likelihood, spark.fit_result.log_likelihood
print(f"local: {len(a)} iterations; spark: {len(b)} iterations")
print(f"largest difference of the traces: {np.max(np.abs(np.subtract(a, b))):.1e}")

# %%
# The two log-likelihood traces on top of each other
# --------------------------------------------------
fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(a, marker="o", label="local backend")
ax.plot(b, marker="x", linestyle="--", label="spark backend (local[2])")
ax.set_xlabel("EM iteration")
ax.set_ylabel("mean log-likelihood per row")
ax.legend()
ax.set_title("one fit, two engines")
fig.tight_layout()
plt.show()
