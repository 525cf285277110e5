"""End to end: a mixture of records with numeric, categorical, sequence and optional fields."""

import numpy as np
import pandas as pd
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
                     GaussianEstimator, MixtureDistribution, MixtureEstimator, RecordDistribution,
                     RecordEstimator)
from mixfold.families.optional import OptionalDistribution, OptionalEstimator
from mixfold.families.sequence import SequenceDistribution, SequenceEstimator

PAGES = ["cart", "checkout", "home", "product", "search"]
PLANS = ["free", "pro", "team"]
LENGTHS = [0, 1, 2, 3, 4, 5, 6]

# (weight, age mean, age variance, plan probs, page probs, length probs, income mean, variance,
#  p_missing)
TRUTH = [
    (0.45, 25.0, 16.0, [0.7, 0.2, 0.1], [0.05, 0.05, 0.5, 0.1, 0.3],
     [0.05, 0.15, 0.3, 0.3, 0.1, 0.05, 0.05], 30.0, 25.0, 0.1),
    (0.3, 45.0, 25.0, [0.2, 0.6, 0.2], [0.2, 0.1, 0.2, 0.4, 0.1],
     [0.02, 0.03, 0.05, 0.1, 0.2, 0.3, 0.3], 60.0, 100.0, 0.2),
    (0.25, 65.0, 36.0, [0.3, 0.1, 0.6], [0.1, 0.3, 0.3, 0.1, 0.2],
     [0.4, 0.3, 0.2, 0.05, 0.05, 0.0, 0.0], 45.0, 64.0, 0.05),
]


def truth_model():
    comps = [RecordDistribution({
        "age": GaussianDistribution(mu, s2),
        "plan": CategoricalDistribution(plan, levels=PLANS),
        "visits": SequenceDistribution(CategoricalDistribution(pages, levels=PAGES),
                                       CategoricalDistribution(lengths, levels=LENGTHS)),
        "income": OptionalDistribution(GaussianDistribution(inc, inc_s2), p_missing),
    }) for _, mu, s2, plan, pages, lengths, inc, inc_s2, p_missing in TRUTH]
    return MixtureDistribution(comps, [t[0] for t in TRUTH])


def estimator():
    record = RecordEstimator({
        "age": GaussianEstimator(),
        "plan": CategoricalEstimator(),
        "visits": SequenceEstimator(CategoricalEstimator(), CategoricalEstimator()),
        "income": OptionalEstimator(GaussianEstimator()),
    })
    return MixtureEstimator([record] * len(TRUTH))


@pytest.fixture(scope="module")
def rows():
    return truth_model().sampler(2024).sample(10_000)


@pytest.fixture(scope="module")
def fitted(rows):
    # the seeded start partitions rows at random: keep the best of a few seeds, as one would
    fits = [mixfold.optimize(rows, estimator(), seed=s, progress=False) for s in range(3)]
    best = max(range(3), key=lambda s: fits[s].fit_result.final_log_likelihood)
    return best, fits[best]


def test_sampled_rows_look_like_user_data(rows):
    row = rows[0]
    assert set(row) == {"age", "plan", "visits", "income"}
    assert isinstance(row["visits"], list) and all(isinstance(p, str) for p in row["visits"])
    assert any(r["visits"] == [] for r in rows)
    assert any(np.isnan(r["income"]) for r in rows)


def test_parameters_are_recovered_up_to_label_permutation(rows, fitted):
    _, fitted = fitted
    assert fitted.fit_result.converged
    order = np.argsort([c.fields["age"].mu for c in fitted.components])  # truth is age-sorted
    n = len(rows)
    for k, (w, mu, s2, plan, pages, lengths, inc, inc_s2, p_missing) in zip(order, TRUTH):
        comp = fitted.components[k].fields
        assert fitted.weights[k] == pytest.approx(w, abs=0.02)
        assert comp["age"].mu == pytest.approx(mu, abs=4 * np.sqrt(s2 / (n * w)))
        assert comp["age"].sigma2 == pytest.approx(s2, abs=4 * s2 * np.sqrt(2 / (n * w)))
        np.testing.assert_allclose(comp["plan"].probs, plan, atol=0.03)
        assert comp["plan"].levels == tuple(PLANS)
        visits = comp["visits"]
        assert visits.item.levels == tuple(PAGES) and visits.length.levels == tuple(LENGTHS)
        np.testing.assert_allclose(visits.item.probs, pages, atol=0.03)
        np.testing.assert_allclose(visits.length.probs, lengths, atol=0.03)
        income = comp["income"]
        assert income.p_missing == pytest.approx(p_missing, abs=0.02)
        n_present = n * w * (1 - p_missing)
        assert income.inner.mu == pytest.approx(inc, abs=4 * np.sqrt(inc_s2 / n_present))
    truth_ll = truth_model().seq_log_density(truth_model().encoder().encode(rows)).mean()
    assert fitted.fit_result.final_log_likelihood > truth_ll - 1e-3  # the MLE beats the truth


def test_dataframe_fits_the_identical_model(rows, fitted):
    frame = pd.DataFrame(rows)
    assert frame["income"].dtype == np.float64 and frame["visits"].dtype == object
    seed, fitted = fitted
    from_frame = mixfold.optimize(frame, estimator(), seed=seed, progress=False)
    assert from_frame == fitted
    assert from_frame.fit_result.iterations == fitted.fit_result.iterations
