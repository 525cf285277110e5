"""A fit with a checkpoint, run as a separate process by test_checkpoint.py.

``python checkpoint_child.py CASE CHECKPOINT OUT [KILL_AT]``: fits CASE (see ``cases``) with
``checkpoint=CHECKPOINT`` (or none when it is "-"); with KILL_AT, prints "ready" after iteration
KILL_AT has been checkpointed and waits to be killed; otherwise writes the fitted model and the
log-likelihood history to OUT.
"""

import json
import sys
import time

import numpy as np

import mixfold
from mixfold import (
    CategoricalEstimator,
    GaussianEstimator,
    MixtureEstimator,
    MultivariateGaussianEstimator,
    OptionalEstimator,
    PoissonEstimator,
    RecordEstimator,
    SequenceEstimator,
)


def records():
    rng = np.random.default_rng(11)
    n = 1500
    seg = rng.integers(0, 3, n)
    rows = [{"age": float(rng.normal([25, 45, 65][s], 5)),
             "plan": ["free", "pro", "team"][(s + int(rng.integers(0, 2))) % 3],
             "visits": int(rng.poisson([2, 8, 20][s])),
             "pages": [str(p) for p in rng.choice(["home", "docs", "pricing"],
                                                  size=int(rng.integers(0, 4)))],
             "income": None if rng.random() < 0.2 else float(rng.normal(50 + 10 * s, 5))}
            for s in seg]
    est = MixtureEstimator([RecordEstimator({
        "age": GaussianEstimator(), "plan": CategoricalEstimator(), "visits": PoissonEstimator(),
        "pages": SequenceEstimator(CategoricalEstimator(), length=PoissonEstimator()),
        "income": OptionalEstimator(GaussianEstimator())})] * 3, pseudo_count=0.5)
    return rows, est


def full_gmm():
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.multivariate_normal(m, np.eye(3) * s, 700)
                        for m, s in (([0, 0, 0], 1.0), ([3, 3, 0], 0.5), ([0, 4, 4], 2.0))])
    return x, MixtureEstimator([MultivariateGaussianEstimator()] * 3)


cases = {"records": records, "full_gmm": full_gmm}


def main() -> None:
    case, checkpoint, out = sys.argv[1:4]
    kill_at = int(sys.argv[4]) if len(sys.argv) > 4 else None
    data, est = cases[case]()

    def wait_to_be_killed(info):
        if info.iteration == kill_at:
            print("ready", flush=True)
            time.sleep(600)

    result = mixfold.fit(data, est, seed=4, max_iter=25, tol=0.0, progress=False,
                         checkpoint=None if checkpoint == "-" else checkpoint,
                         callbacks=[wait_to_be_killed] if kill_at is not None else ())
    with open(out, "w") as fh:
        json.dump({"model": result.model.to_dict(), "log_likelihood": result.log_likelihood,
                   "iterations": result.iterations, "stop_reason": result.stop_reason}, fh)


if __name__ == "__main__":
    main()
