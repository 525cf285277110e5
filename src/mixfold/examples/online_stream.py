"""Online EM on a stream: a mixture updated block by block as rows arrive, never all in memory.

A stream of 2-D rows from three clusters arrives in blocks of 500; :class:`mixfold.OnlineEM`
takes one stepwise-EM step per block, so the model is usable (and scored on held-out rows)
after every block. The batch fit of all the rows at once is the reference the stream should
approach.

    python -m mixfold.examples.online_stream [--blocks 40]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator

import numpy as np

import mixfold
from mixfold import DiagonalGaussianDistribution, MixtureDistribution, MixtureEstimator

__all__ = ["TRUTH", "stream", "run", "main"]

#: The distribution the stream is drawn from.
TRUTH = MixtureDistribution(
    [DiagonalGaussianDistribution([0.0, 0.0], [1.0, 1.0]),
     DiagonalGaussianDistribution([5.0, 1.0], [0.5, 2.0]),
     DiagonalGaussianDistribution([1.0, 6.0], [2.0, 0.5])], [0.5, 0.3, 0.2])


def stream(blocks: int, block_rows: int = 500, seed: int = 1) -> Iterator[np.ndarray]:
    """``blocks`` blocks of ``block_rows`` rows each, drawn one at a time."""
    for i in range(blocks):
        yield TRUTH.sampler(seed + i).sample(block_rows)


def run(blocks: int = 40, block_rows: int = 500) -> dict:
    """Stream the blocks through OnlineEM; returns the held-out score after each block, the
    batch fit's score on the same held-out rows, and both models."""
    held_out = TRUTH.sampler(0).sample(5_000)
    estimator = MixtureEstimator([mixfold.DiagonalGaussianEstimator()] * 3)
    online = mixfold.OnlineEM(estimator, init_rows=block_rows)
    rows_seen, scores = [], []
    for block in stream(blocks, block_rows):
        online.partial_fit(block)
        if online.model is not None:
            rows_seen.append(online.n_rows_seen)
            scores.append(online.score(held_out))
    everything = np.concatenate(list(stream(blocks, block_rows)))
    batch = mixfold.optimize(everything, estimator, progress=False)
    return {"rows_seen": np.array(rows_seen), "scores": np.array(scores), "online": online.model,
            "batch": batch, "batch_score": float(batch.seq_log_density(held_out).mean()),
            "truth_score": float(TRUTH.seq_log_density(held_out).mean())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=40)
    args = parser.parse_args(argv)
    out = run(args.blocks)
    print(f"held-out mean log-likelihood per row after {out['rows_seen'][-1]} streamed rows: "
          f"{out['scores'][-1]:.4f} (batch fit {out['batch_score']:.4f}, the true model "
          f"{out['truth_score']:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
