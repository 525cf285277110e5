"""
A heterogeneous plan across workers
===================================

Workers differ in speed and in the arithmetic they run. The planner gives each worker the
fastest precision band it supports whose a-priori error meets the accuracy budget (or, when
none does, its most accurate band), splits the rows in proportion to speed, and the fit runs
exactly that plan. Here three workers share a fit in this process (``backend="mp"``,
``"spark"``, ``"dask"``, ``"ray"`` or ``"mpi"`` run the same plan on their workers); then
2,000 workers are planned on paper and one iteration is simulated.

The code is :mod:`mixfold.examples.heterogeneous_plan`.
"""

# %%
# Plan and execute the fit over three workers
# -------------------------------------------
import matplotlib.pyplot as plt

from mixfold.examples.heterogeneous_plan import run, simulated_pool
from mixfold.parallel.simulation import plot_finish_times
from mixfold.plots import plot_plan_timeline

out = run(n_rows=20_000, target_rel_error=1e-5)
print(out["plan"].describe())
print(f"largest difference of a component mean from the float64 fit: "
      f"{out['largest_mean_difference']:.1e}")

# %%
# Each worker's planned E-step, and 2,000 workers simulated
# ---------------------------------------------------------
# Left: the planned seconds of each worker (rows over its rate, relative speeds here), the band
# in its label. Right: when each of 2,000 simulated workers finishes its E-step and when its
# payload is merged into the reduce tree, against an even split of the rows.
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), width_ratios=(1, 2))
spans = [(f"{a.name} ({a.precision}, {a.rows} rows)", 0.0, a.seconds)
         for a in out["plan"].assignments]
plot_plan_timeline(spans, ax=left)
left.set_xlabel("planned E-step time (relative units)")
plan, report = simulated_pool(n_workers=2_000)
plot_finish_times(report, ax=right)
fig.tight_layout()
plt.show()
