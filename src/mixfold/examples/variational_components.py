"""Choosing the number of components with a variational Dirichlet-process mixture.

Records of four groups (a Gaussian measurement, a categorical answer missing for a fifth of
the rows, a count) are fitted with room for ten components. Plain EM uses all ten; the
variational fit (:class:`mixfold.VariationalMixtureEstimator`, a Dirichlet-process prior on
the weights) empties the six it does not need, and its evidence lower bound rises at every
iteration.

    python -m mixfold.examples.variational_components [--rows 2000]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import mixfold
from mixfold import (CategoricalEstimator, GaussianEstimator, MixtureEstimator,
                     OptionalEstimator, PoissonEstimator, RecordEstimator,
                     VariationalMixtureEstimator)

__all__ = ["records", "run", "main"]

#: Per group: the measurement's mean, the answers' probabilities, the count's rate, the share.
GROUPS = [(-6.0, [0.8, 0.1, 0.1], 1.0, 0.4), (-1.0, [0.1, 0.8, 0.1], 4.0, 0.3),
          (4.0, [0.1, 0.1, 0.8], 9.0, 0.2), (9.0, [0.4, 0.4, 0.2], 20.0, 0.1)]


def records(rows: int, seed: int = 0) -> tuple[list[dict], np.ndarray]:
    """``rows`` records and the group each was drawn from."""
    rng = np.random.default_rng(seed)
    group = rng.choice(len(GROUPS), size=rows, p=[g[3] for g in GROUPS])
    out = []
    for g in group:
        mean, answers, rate, _ = GROUPS[g]
        answer = None if rng.random() < 0.2 else str(rng.choice(["yes", "no", "maybe"], p=answers))
        out.append({"size": float(rng.normal(mean, 1.0)), "answer": answer,
                    "visits": int(rng.poisson(rate))})
    return out, group


def run(rows: int = 2000, components: int = 10) -> dict:
    """Fit plain EM and the variational mixture with ``components`` each; returns both fits'
    weights (largest first), the lower bound per iteration and the groups' adjusted Rand
    index of the variational fit."""
    from sklearn.metrics import adjusted_rand_score

    data, group = records(rows)
    record = RecordEstimator({"size": GaussianEstimator(),
                              "answer": OptionalEstimator(CategoricalEstimator()),
                              "visits": PoissonEstimator()})
    em = mixfold.fit(data, MixtureEstimator([record] * components), seed=1, progress=False)
    vb = mixfold.fit(data, VariationalMixtureEstimator([record] * components,
                                                       weight_concentration=0.01),
                     seed=1, tol=1e-8, max_iter=300, progress=False)
    return {"em_weights": np.sort(em.model.weights)[::-1],
            "vb_weights": np.sort(vb.model.weights)[::-1],
            "lower_bound": np.array(vb.lower_bound),
            "used": int((vb.model.weights > 0.01).sum()),
            "ari": float(adjusted_rand_score(group, vb.model.predict(data)))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    args = parser.parse_args(argv)
    out = run(args.rows)
    print(f"components used (weight > 0.01): EM {int((out['em_weights'] > 0.01).sum())}, "
          f"variational {out['used']} (adjusted Rand index {out['ari']:.3f} against the groups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
