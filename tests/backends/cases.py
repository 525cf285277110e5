"""Fits every backend runs and compares with the local backend (data made from fixed seeds)."""

import numpy as np

from mixfold import (CategoricalDistribution, CategoricalEstimator, CompositeEstimator,
                     GaussianDistribution, GaussianEstimator, LDADistribution, LDAEstimator,
                     MixtureDistribution, MixtureEstimator, MultivariateGaussianEstimator,
                     RecordDistribution, RecordEstimator)


def gmm():
    truth = MixtureDistribution([GaussianDistribution(-4, 1), GaussianDistribution(0, 0.5),
                                 GaussianDistribution(5, 2)], [0.2, 0.5, 0.3])
    rows = truth.sampler(0).sample(4000)
    return rows, MixtureEstimator([GaussianEstimator()] * 3), {"seed": 3, "max_iter": 12,
                                                                "tol": 0.0}


def gmm_far():
    """The gmm case 1e9 away from the origin (a Unix-timestamp-like column): local is
    translation-equivariant (tests/test_equivariance.py), so an engine equal to local is too."""
    rows, est, options = gmm()
    return np.asarray(rows) + 1e9, est, options


def records():
    """Records whose categorical levels differ between the first and the last rows (merged
    vocabularies) and whose two Gaussian fields are tied by a key."""
    def rec(m, p):
        return RecordDistribution({"a": GaussianDistribution(m, 1.0),
                                   "b": GaussianDistribution(m, 1.0),
                                   "c": CategoricalDistribution({"u": p, "v": 1 - p})})
    rows = MixtureDistribution([rec(-2.0, 0.8), rec(2.0, 0.3)], [0.4, 0.6]).sampler(1).sample(3000)
    rows[-5:] = [{"a": 0.0, "b": 0.1, "c": "rare"}] * 5  # a level only the last shard sees
    comp = RecordEstimator({"a": GaussianEstimator(keys="ab"), "b": GaussianEstimator(keys="ab"),
                            "c": CategoricalEstimator(pseudo_count=0.5)})
    return rows, MixtureEstimator([comp] * 2, pseudo_count=1.0), {"seed": 5, "max_iter": 10,
                                                                   "tol": 0.0}


def missing_entries():
    """A full-covariance mixture on rows with a fifth of their entries missing (NaN)."""
    rng = np.random.default_rng(4)
    rows = np.concatenate([rng.normal(0.0, 1.0, (1500, 3)), rng.normal(4.0, 0.7, (1500, 3))])
    rows[rng.random(rows.shape) < 0.2] = np.nan
    return rows, MixtureEstimator([MultivariateGaussianEstimator(missing=True)] * 2), \
        {"seed": 2, "max_iter": 8, "tol": 0.0}


def tuples():
    rng = np.random.default_rng(2)
    rows = list(zip(rng.normal(0, 1, 2000).tolist(), rng.normal(3, 2, 2000).tolist()))
    return rows, CompositeEstimator([GaussianEstimator(), GaussianEstimator()]), {"max_iter": 3}


def lda():
    """Documents from 4 known topics over 60 words, whose vocabulary each shard learns apart."""
    rng = np.random.default_rng(4)
    topics = rng.dirichlet(np.full(60, 0.1), size=4) * 1e7 + 1e-3
    truth = LDADistribution(topics, 0.3, vocabulary=[f"w{i}" for i in range(60)],
                            mean_length=30.0)
    return truth.sampler(2).sample(400), LDAEstimator(4), {"seed": 1, "max_iter": 4, "tol": 0.0}


def gmm_model_parallel():
    """The gmm case with its components threaded over 2 workers inside every shard."""
    from mixfold.parallel.model_parallel import ModelParallelEstimator

    rows, est, options = gmm()
    return rows, ModelParallelEstimator(est, num_workers=2), options


def lda_model_parallel():
    """The lda case with its topics cut over 2 workers inside every shard."""
    from mixfold.parallel.model_parallel import ModelParallelEstimator

    rows, est, options = lda()
    return rows, ModelParallelEstimator(est, num_workers=2), options


CASES = {"gmm": gmm, "gmm_far": gmm_far, "records": records, "tuples": tuples, "lda": lda,
         "missing_entries": missing_entries,
         "gmm_model_parallel": gmm_model_parallel, "lda_model_parallel": lda_model_parallel}
