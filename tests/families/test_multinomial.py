import numpy as np
import pytest
from scipy import stats

import mixfold
from mixfold import (DataError, DataTypeError, MixtureDistribution, MultinomialDistribution,
                     MultinomialEstimator, ParameterError)
from mixfold.families.multinomial import MultinomialEncoder
from tests.families.family_checks import (check_decomposition, check_mixture_step,
                                          check_model_file, check_monotone_mixture,
                                          check_payload_halves, check_weights_are_repeats)

LEVELS = ("a", "b", "c", "d")


def random_bags(rng, n, probs=(0.1, 0.2, 0.3, 0.4), max_total=12):
    totals = rng.integers(0, max_total, size=n)
    counts = np.array([rng.multinomial(t, probs) for t in totals])
    return [{LEVELS[j]: int(c[j]) for j in np.flatnonzero(c)} for c in counts], counts


@pytest.mark.parametrize("probs", [[0.1, 0.2, 0.3, 0.4], [0.0, 0.5, 0.5, 0.0], [1e-12, 0.5, 0.25,
                                                                                0.25 - 1e-12]])
def test_log_density_matches_scipy(probs, rng):
    rows, counts = random_bags(rng, 200)
    d = MultinomialDistribution(probs, levels=LEVELS)
    enc = d.encoder().encode(rows)
    want = np.array([stats.multinomial(c.sum(), probs).logpmf(c) for c in counts])
    got = d.seq_log_density(enc)
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-11)
    assert not np.isnan(got).any()
    stacked = MultinomialDistribution.stack_log_density(
        [d, MultinomialDistribution([0.25] * 4, LEVELS)], enc)
    np.testing.assert_allclose(stacked[:, 0], want, rtol=1e-11, atol=1e-11)


def test_tokens_and_mappings_encode_the_same_counts():
    enc = MultinomialEncoder().fit([["b", "a", "b"], {"c": 2, "a": 0}, []])
    assert enc.levels == ("a", "b", "c")
    x = enc.encode([["b", "a", "b"], {"c": 2, "a": 0}, [], ("c",)]).values
    np.testing.assert_array_equal(x, [[1, 2, 0], [0, 0, 2], [0, 0, 0], [0, 0, 1]])
    d = MultinomialDistribution([0.2, 0.3, 0.5], ["a", "b", "c"])
    assert d.log_density([]) == 0.0  # the empty bag: one way to draw nothing
    assert d.log_density(["b", "a", "b"]) == pytest.approx(d.log_density({"a": 1, "b": 2}))


def test_bad_rows_name_the_row():
    enc = MultinomialEncoder(("a", "b"))
    with pytest.raises(DataError, match="row 2: level 'z' is not among"):
        enc.encode([["a"], ["b"], ["a", "z"]])
    with pytest.raises(DataTypeError, match="row 1: expected a list of tokens"):
        enc.encode([["a"], "ab"])
    with pytest.raises(DataError, match="row 0: expected a count"):
        enc.encode([{"a": 1.5}])
    with pytest.raises(DataError, match="row 0: expected a count"):
        enc.encode([{"a": -1}])
    with pytest.raises(DataError, match="row 1: missing value"):
        MultinomialEncoder().fit([["a"], ["b", None]])
    with pytest.raises(ParameterError):
        MultinomialDistribution([0.5, 0.6], ["a", "b"])


def test_mle_is_the_share_of_each_level_and_pseudo_counts_smooth(rng):
    rows, counts = random_bags(rng, 500)
    d = mixfold.optimize(rows, MultinomialEstimator(), progress=False)
    np.testing.assert_allclose(d.probs, counts.sum(axis=0) / counts.sum(), rtol=1e-12)
    smooth = mixfold.optimize([["a"]], MultinomialEstimator(levels=LEVELS, pseudo_count=1.0),
                              progress=False)
    np.testing.assert_allclose(smooth.probs, [0.4, 0.2, 0.2, 0.2])


def test_sampler_draws_bags_of_trials_tokens():
    d = MultinomialDistribution([0.1, 0.2, 0.3, 0.4], LEVELS, trials=20)
    rows = d.sampler(0).sample(5000)
    assert all(sum(r.values()) == 20 for r in rows)
    x = d.encoder().encode(rows).values
    se = np.sqrt(20 * d.probs * (1 - d.probs) / len(rows))
    assert (np.abs(x.mean(axis=0) - 20 * d.probs) < 4 * se).all()


def test_contract(rng, tmp_path):
    d = MultinomialDistribution([0.1, 0.2, 0.3, 0.4], LEVELS)
    check_model_file(d, tmp_path)
    check_model_file(MultinomialDistribution([0.5, 0.5], [("t", 1), 2], trials=7), tmp_path)
    assert d.to_dict() == {"family": "Multinomial", "levels": list(LEVELS),
                           "probs": [0.1, 0.2, 0.3, 0.4]}
    assert d.n_parameters() == 3
    assert check_decomposition(d).row_work == 4.0
    rows, _ = random_bags(rng, 300)
    check_payload_halves(MultinomialEstimator(), rows, d, rng)
    check_weights_are_repeats(MultinomialEstimator, rows[:60], rng)


def test_fused_mixture_step_matches_scipy(rng):
    comps = [MultinomialDistribution(p, LEVELS) for p in ([0.1, 0.2, 0.3, 0.4],
                                                          [0.5, 0.3, 0.1, 0.1])]
    rows, counts = random_bags(rng, 1000, probs=(0.25,) * 4)

    def ref(c, _):
        return np.array([stats.multinomial(x.sum(), c.probs).logpmf(x) for x in counts])

    check_mixture_step(MultinomialEstimator(), comps, rows, ref, rng)
    zero = [MultinomialDistribution([0.0, 0.5, 0.5, 0.0], LEVELS), comps[1]]
    check_mixture_step(MultinomialEstimator(), zero, rows, ref, rng)  # falls back: log 0


def test_mixture_of_two_topics_is_recovered():
    truth = MixtureDistribution([
        MultinomialDistribution([0.7, 0.1, 0.1, 0.1], LEVELS, trials=30),
        MultinomialDistribution([0.05, 0.05, 0.3, 0.6], LEVELS, trials=30)], [0.3, 0.7])
    rows = truth.sampler(0).sample(3000)
    fit = check_monotone_mixture(lambda: MultinomialEstimator(pseudo_count=0.1), rows).model
    order = np.argsort([-c.probs[0] for c in fit.components])
    np.testing.assert_allclose([fit.components[i].probs for i in order],
                               [[0.7, 0.1, 0.1, 0.1], [0.05, 0.05, 0.3, 0.6]], atol=0.02)
    np.testing.assert_allclose(fit.weights[order], [0.3, 0.7], atol=0.02)
