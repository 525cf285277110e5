"""
A heterogeneous plan across workers
===================================

Workers differ in speed and in the arithmetic they run. The planner gives each worker the
fastest precision band it supports whose error meets the accuracy budget (measured by
calibration, else a-priori; a worker none of whose bands meets it gets no rows), splits the
rows in proportion to speed, and the fit runs exactly that plan. Here three workers share a
fit in this process (``backend="mp"``, ``"spark"``, ``"dask"``, ``"ray"`` or ``"mpi"`` run the
same plan on their workers); then
2,000 workers are planned on paper and one iteration is simulated.

The code is :mod:`mixfold.examples.heterogeneous_plan`.
"""

# %%
# Plan and execute the fit over three workers
# -------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from mixfold.examples.heterogeneous_plan import run, simulated_pool

out = run(n_rows=20_000, target_rel_error=1e-4)
print(out["plan"].describe())
print(f"largest difference of a component mean from the float64 fit: "
      f"{out['largest_mean_difference']:.1e}")

# %%
# Rows per worker, and 2,000 workers simulated
# --------------------------------------------
# Left: the rows each worker holds, its band in the label; the fast float32 worker holds three
# times the rows of each float64 one, so all three finish their E-step together. Right: the
# E-step finish time of each of 2,000 simulated workers (one GPU in ten) under the plan and
# under an even split of the rows, where the slowest workers decide the iteration.
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4), width_ratios=(1, 2))
assignments = out["plan"].assignments
left.barh([f"{a.name} ({a.precision})" for a in assignments], [a.rows for a in assignments],
          color=[f"C{i}" for i in range(len(assignments))])
left.invert_yaxis()
left.set_xlabel("rows held")
left.set_title("the executed plan")

plan, report = simulated_pool(n_workers=2_000)
even = plan.n_rows / len(plan.assignments)
even_finish = np.array([even / a.effective_throughput for a in plan.assignments])
right.scatter(np.arange(even_finish.size), even_finish, s=4, color="grey", label="even split")
right.scatter(np.arange(even_finish.size), report.e_step_seconds, s=4, label="planned")
right.axhline(report.makespan, color="k", linewidth=1,
              label=f"planned iteration (E-step + reduce) {report.makespan:.3g} s")
right.set_xlabel("worker")
right.set_ylabel("E-step finished (s)")
right.legend(fontsize="small")
right.set_title(f"{len(plan.assignments)} workers, simulated")
fig.tight_layout()
plt.show()
