"""
Segmenting mixed-type customers with missing values
===================================================

3,000 customers, each a record of four fields of different types: age (Gaussian), plan
(categorical), monthly visits (Poisson) and monthly spend (log-normal, missing for some
customers). A mixture of three such records finds the segments; the missing spends are not
imputed: :class:`~mixfold.OptionalEstimator` gives "missing" its own probability in each
segment, and a row with no spend is scored by its other fields.

The data ships with mixfold; :mod:`mixfold.examples.customers` holds the loader and the
estimator (``python -m mixfold.examples.customers`` runs the same fit from a shell).
"""

# %%
# Fit the mixture of records
# --------------------------
import matplotlib.pyplot as plt
import numpy as np

import mixfold
from mixfold.examples.customers import customer_estimator, load_customers
from mixfold.plots import plot_log_likelihood

rows = load_customers()
print(f"{len(rows)} customers, {sum(r['spend'] is None for r in rows)} without a spend")
model = mixfold.optimize(rows, customer_estimator(3), seed=0, tol=1e-8, max_iter=200,
                         progress=False)
print(model.fit_result.stop_reason, "after", model.fit_result.iterations, "iterations")

# %%
# What each segment looks like
# ----------------------------
# Each row goes to its most probable segment. Left: age against visits, coloured by segment
# (a customer without a spend is a hollow marker: it is segmented all the same). Right: the
# fitted share of each plan and the probability that spend is missing, per segment.
segment = model.predict(rows)
age = np.array([r["age"] for r in rows])
visits = np.array([r["visits"] for r in rows])
missing = np.array([r["spend"] is None for r in rows])
order = np.argsort([c.fields["age"].mu for c in model.components])

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
for rank, k in enumerate(order):
    mine = segment == k
    left.scatter(age[mine & ~missing], visits[mine & ~missing], s=6, color=f"C{rank}",
                 label=f"segment {rank} ({model.weights[k]:.0%})")
    left.scatter(age[mine & missing], visits[mine & missing], s=14, facecolors="none",
                 edgecolors=f"C{rank}")
left.set_xlabel("age")
left.set_ylabel("visits per month")
left.legend(fontsize="small")
left.set_title("customers by segment (hollow: spend missing)")

plan = model.components[order[0]].fields["plan"]
width = 0.8 / (len(plan.levels) + 1)
for j, level in enumerate(plan.levels):
    shares = [model.components[k].fields["plan"].probs[j] for k in order]
    right.bar(np.arange(3) + j * width, shares, width, label=f"plan {level}")
right.bar(np.arange(3) + len(plan.levels) * width,
          [model.components[k].fields["spend"].p_missing for k in order], width, color="grey",
          label="spend missing")
right.set_xticks(np.arange(3) + 0.4 - width / 2, [f"segment {r}" for r in range(3)])
right.set_ylabel("probability")
right.legend(fontsize="small")
right.set_title("plan and missing spend per segment")
fig.tight_layout()

# %%
# The log-likelihood climbs at every iteration
# --------------------------------------------
plot_log_likelihood(model)
plt.show()
