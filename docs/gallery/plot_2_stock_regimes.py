"""
A Gaussian hidden Markov model on a real sequence
=================================================

Google's daily closing prices from 2004 to 2008 (the sample data that ships with matplotlib)
give 1,046 daily log returns: one sequence. A hidden Markov model with two Gaussian states
finds a calm regime and a turbulent one; the Viterbi path says which regime each day was in,
and the transition matrix how long a regime lasts.

The code is :mod:`mixfold.examples.stock_regimes`.
"""

# %%
# Fit the two-state model to the one sequence of returns
# ------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from mixfold.examples.stock_regimes import fit_regimes, load_prices

dates, prices = load_prices()
out = fit_regimes(prices, states=2)
for s, name in enumerate(("calm", "turbulent")):
    print(f"{name}: daily sd {out['sd'][s]:.2f}%, {np.mean(out['path'] == s):.0%} of days, "
          f"lasts {out['expected_days'][s]:.0f} days on average")

# %%
# The price, coloured by the most probable regime of each day
# -----------------------------------------------------------
fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
days = dates[1:]
for s, name in enumerate(("calm", "turbulent")):
    on = out["path"] == s
    top.scatter(days[on], prices[1:][on], s=4, color=f"C{s}", label=name)
    bottom.vlines(days[on], 0, out["returns"][on], color=f"C{s}", linewidth=0.8)
top.set_ylabel("adjusted close (USD)")
top.legend()
top.set_title("GOOG 2004-2008: Viterbi path of a two-state Gaussian HMM")
bottom.set_ylabel("daily log return (%)")
fig.tight_layout()
plt.show()
