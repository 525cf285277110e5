"""
Online EM on a stream
=====================

Rows arrive in blocks of 500 and are never all in memory: :class:`mixfold.OnlineEM` takes one
stepwise-EM step per block, so a usable model exists after every block. Scored on 5,000
held-out rows after each block, the streamed model approaches the batch fit of all the rows
at once (the dashed line), which itself sits just below the true model's score.

The stream and the fit are :mod:`mixfold.examples.online_stream`.
"""

# %%
# Stream 40 blocks through OnlineEM
# ---------------------------------
import matplotlib.pyplot as plt

from mixfold.examples.online_stream import run

out = run(blocks=40, block_rows=500)
print(f"after {out['rows_seen'][-1]} rows: held-out {out['scores'][-1]:.4f}, batch fit "
      f"{out['batch_score']:.4f}, true model {out['truth_score']:.4f}")

# %%
# The held-out log-likelihood after each block
# --------------------------------------------
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(out["rows_seen"], out["scores"], marker="o", markersize=3, label="OnlineEM")
ax.axhline(out["batch_score"], color="k", linestyle="--", label="batch fit of all rows")
ax.axhline(out["truth_score"], color="grey", linestyle=":", label="true model")
ax.set_xlabel("rows seen")
ax.set_ylabel("held-out mean log-likelihood per row")
ax.legend()
ax.set_title("stepwise EM, one step per block of 500 rows")
fig.tight_layout()
plt.show()
