"""P-HSMM: the explicit-duration HMM's E-step against the same law as an expanded-state HMM.

    python benchmarks/semi_markov.py           # S=4 states, D in 10/30/60, 100 x 400 items
    python benchmarks/semi_markov.py --quick   # smoke run

An explicit-duration HMM with S states and durations up to D is an ordinary HMM over the S * D
pairs (state, steps remaining) with a sparse transition matrix. Each row times one E-step fold
(``seq_update``: scoring the emissions, the forward-backward, adding the statistics), the median
of ``--repeats`` after a warm-up, of

- ``HiddenSemiMarkovEstimator``'s accumulator: the segment recursion, O(T * S * D), compiled;
- ``HiddenMarkovEstimator``'s accumulator on the expanded model: the dense recursion over S * D
  states, O(T * (S * D)^2), compiled (the HMM kernel the project fits HMMs with);

in the same process on the same rows, and how far apart their log-likelihoods and posterior
state probabilities are (they are the same law: the difference is rounding).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from datetime import date

import numpy as np

from mixfold import (GaussianDistribution, GaussianEstimator, HiddenMarkovDistribution,
                     HiddenMarkovEstimator, HiddenSemiMarkovDistribution,
                     HiddenSemiMarkovEstimator, PoissonDistribution, PoissonEstimator)

STATES = 4


def semi_markov_model(d: int) -> HiddenSemiMarkovDistribution:
    s = STATES
    moves = (np.ones((s, s)) - np.eye(s)) / (s - 1)
    return HiddenSemiMarkovDistribution(
        [GaussianDistribution(float(k) - 1.5, 1.0) for k in range(s)],
        [PoissonDistribution(d / 3 + k) for k in range(s)], np.full(s, 1 / s), moves,
        max_duration=d)


def expanded(hsmm: HiddenSemiMarkovDistribution) -> HiddenMarkovDistribution:
    """The same law over (state, steps remaining) pairs."""
    s, d = hsmm.num_states, hsmm.max_duration
    p = np.exp(hsmm.duration_table)
    step = np.zeros((s * d, s * d))
    for a in range(s):
        for r in range(1, d):
            step[a * d + r, a * d + r - 1] = 1.0
        step[a * d] = (hsmm.transitions[a][:, None] * p).ravel()
    return HiddenMarkovDistribution([e for e in hsmm.emissions for _ in range(d)],
                                    (hsmm.initial[:, None] * p).ravel(), step)


def fold_seconds(estimator, model, enc, weights, repeats: int):
    """(median seconds of one seq_update, its log-likelihoods, its item posteriors)."""
    make = estimator.accumulator_factory().make
    make().seq_update(enc, weights, model)  # warm-up: kernels loaded, threads measured
    times = []
    for _ in range(repeats):
        acc = make()
        start = time.perf_counter()
        ll = acc.seq_update(enc, weights, model)
        times.append(time.perf_counter() - start)
    return statistics.median(times), ll


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    n_rows, length, durations = (10, 60, (5, 10)) if args.quick else (100, 400, (10, 30, 60))
    print(f"## P-HSMM: explicit-duration HMM vs the expanded-state HMM "
          f"({platform.machine()}, {os.cpu_count()} CPUs, {date.today().isoformat()})\n")
    print(f"{n_rows} sequences x {length} items, S={STATES} Gaussian states with Poisson "
          f"durations; one E-step fold, median of {args.repeats}\n")
    print("| D | expanded states | HSMM s/fold | expanded HMM s/fold | expanded / HSMM "
          "| max abs diff log-lik | max abs diff posteriors |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for d in durations:
        hsmm = semi_markov_model(d)
        rows = hsmm.sampler(0, sample_length=length).sample(n_rows)
        hmm = expanded(hsmm)
        semi_est = HiddenSemiMarkovEstimator([GaussianEstimator()] * STATES,
                                             [PoissonEstimator()] * STATES, max_duration=d)
        flat_est = HiddenMarkovEstimator([GaussianEstimator()] * (STATES * d))
        enc = semi_est.encoder().fit(rows).encode(rows)
        weights = np.ones(n_rows)
        semi_s, semi_ll = fold_seconds(semi_est.bind(semi_est.encoder().fit(rows)), hsmm, enc,
                                       weights, args.repeats)
        flat_s, flat_ll = fold_seconds(flat_est.bind(flat_est.encoder().fit(rows)), hmm, enc,
                                       weights, args.repeats)
        gap_post = np.abs(hsmm.seq_posterior(enc)
                          - hmm.seq_posterior(enc).reshape(-1, STATES, d).sum(axis=2)).max()
        print(f"| {d} | {STATES * d} | {semi_s:.4f} | {flat_s:.4f} | {flat_s / semi_s:.1f} "
              f"| {np.abs(semi_ll - flat_ll).max():.1e} | {gap_post:.1e} |")


if __name__ == "__main__":
    main()
