"""Calm and turbulent days of a stock: a two-state Gaussian hidden Markov model of daily returns.

The sequence is real: Google's daily closing prices from 2004 to 2008, the sample data that
ships with matplotlib (``goog.npz``). The daily log returns are one sequence; a hidden Markov
model with two Gaussian states separates the calm regime (small variance) from the turbulent one
and says how long each lasts (the expected stay in a state is ``1 / (1 - p_stay)`` days).

    python -m mixfold.examples.stock_regimes
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import mixfold
from mixfold import GaussianEstimator, HiddenMarkovEstimator

__all__ = ["load_prices", "fit_regimes", "main"]


def load_prices() -> tuple[np.ndarray, np.ndarray]:
    """The dates (numpy datetime64[D]) and adjusted closing prices of matplotlib's ``goog.npz``."""
    from matplotlib import cbook

    data = cbook.get_sample_data("goog.npz")["price_data"]
    return data["date"].astype("datetime64[D]"), data["adj_close"].astype(np.float64)


def fit_regimes(prices: np.ndarray, states: int = 2, seed: int = 0) -> dict:
    """Fit the HMM to the daily log returns (in percent); states are ordered calm first."""
    returns = 100.0 * np.diff(np.log(prices))
    model = mixfold.optimize([returns], HiddenMarkovEstimator([GaussianEstimator()] * states),
                             seed=seed, tol=1e-8, max_iter=300, progress=False)
    order = np.argsort([c.sigma2 for c in model.emissions])  # calm (small variance) first
    path = np.argsort(order)[model.viterbi(returns)]
    stay = np.diag(np.asarray(model.transitions))[order]
    return {"model": model, "returns": returns, "path": path,
            "sd": np.sqrt([model.emissions[i].sigma2 for i in order]),
            "mean": np.array([model.emissions[i].mu for i in order]),
            "expected_days": 1.0 / (1.0 - stay)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--states", type=int, default=2)
    args = parser.parse_args(argv)
    dates, prices = load_prices()
    out = fit_regimes(prices, args.states)
    print(f"{len(out['returns'])} daily returns, {dates[0]} to {dates[-1]}; "
          f"{out['model'].fit_result.iterations} EM iterations")
    for s in range(args.states):
        print(f"  state {s}: daily sd {out['sd'][s]:.2f}%, mean {out['mean'][s]:+.3f}%, "
              f"{np.mean(out['path'] == s):.0%} of days, stays {out['expected_days'][s]:.0f} "
              f"days on average")
    return 0


if __name__ == "__main__":
    sys.exit(main())
