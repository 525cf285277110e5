"""Markov chains over levels: counts, recovery, fields, HMM emissions, mixtures, backends."""

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, HiddenMarkovEstimator,
                     MarkovChainDistribution, MarkovChainEstimator, MixtureEstimator,
                     OptionalEstimator, PoissonDistribution, PoissonEstimator, RecordEstimator)
from mixfold.errors import DataError, ParameterError
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_payload_halves)

PAGES = ["home", "list", "item", "cart"]
BROWSE = MarkovChainDistribution([0.7, 0.3, 0.0, 0.0],
                                 [[0.2, 0.7, 0.1, 0.0], [0.1, 0.3, 0.6, 0.0],
                                  [0.1, 0.6, 0.2, 0.1], [0.5, 0.0, 0.0, 0.5]], PAGES)
BUY = MarkovChainDistribution([0.1, 0.0, 0.9, 0.0],
                              [[0.1, 0.1, 0.4, 0.4], [0.0, 0.2, 0.4, 0.4],
                               [0.0, 0.0, 0.3, 0.7], [0.1, 0.0, 0.1, 0.8]], PAGES)


def _counted(rows, levels):
    """The closed-form MLE written as plain Python counting (the independent reference)."""
    k = len(levels)
    index = {v: i for i, v in enumerate(levels)}
    first, pairs = np.zeros(k), np.zeros((k, k))
    for row in rows:
        if row:
            first[index[row[0]]] += 1
        for a, b in zip(row, row[1:]):
            pairs[index[a], index[b]] += 1
    return first / first.sum(), pairs / pairs.sum(axis=1, keepdims=True)


def test_log_density_is_the_product_along_the_path():
    row = ["home", "list", "item", "item", "cart"]
    want = np.log(0.7 * 0.7 * 0.6 * 0.2 * 0.1)
    assert BROWSE.log_density(row) == pytest.approx(want, rel=1e-14)
    assert BROWSE.log_density([]) == 0.0
    assert BROWSE.log_density(["cart"]) == -np.inf  # cart is never a first page


def test_fit_is_the_normalised_counts():
    rows = BROWSE.sampler(1, sample_length=12).sample(300) + [["cart"], []]
    fit = mixfold.optimize(rows, MarkovChainEstimator(PAGES), progress=False)
    initial, transitions = _counted(rows, PAGES)
    np.testing.assert_allclose(fit.initial, initial, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(fit.transitions, transitions, rtol=1e-13, atol=1e-15)


def test_recovers_known_parameters_and_length_law():
    truth = MarkovChainDistribution(BROWSE.initial, BROWSE.transitions, PAGES,
                                    PoissonDistribution(8.0))
    rows = truth.sampler(5).sample(6000)
    fit = mixfold.optimize(rows, MarkovChainEstimator(length=PoissonEstimator()), progress=False)
    assert fit.levels == tuple(sorted(PAGES))  # learnt from the data (sorted)
    order = [fit.levels.index(p) for p in PAGES]
    np.testing.assert_allclose(fit.initial[order], truth.initial, atol=0.02)
    np.testing.assert_allclose(fit.transitions[np.ix_(order, order)], truth.transitions,
                               atol=0.03)
    assert fit.length.lam == pytest.approx(8.0, rel=0.02)


def test_pseudo_count_keeps_unseen_transitions_possible():
    rows = [["a", "b"], ["a", "a"]]
    fit = mixfold.optimize(rows, MarkovChainEstimator(pseudo_count=1.0), progress=False)
    np.testing.assert_allclose(fit.initial, [3 / 4, 1 / 4])
    np.testing.assert_allclose(fit.transitions, [[2 / 4, 2 / 4], [1 / 2, 1 / 2]])


def test_mixture_of_two_chains_recovers_both():
    rng = np.random.default_rng(0)
    browse = BROWSE.sampler(rng, sample_length=15).sample(600)
    buy = BUY.sampler(rng, sample_length=15).sample(400)
    rows = browse + buy
    fit = mixfold.optimize(rows, MixtureEstimator([MarkovChainEstimator(PAGES)] * 2),
                           seed=1, progress=False)
    k_browse = int(np.argmax([c.transitions[1, 2] * c.initial[0] for c in fit.components]))
    np.testing.assert_allclose(fit.weights[k_browse], 0.6, atol=0.03)
    for chain, truth, own in [(fit.components[k_browse], BROWSE, browse),
                              (fit.components[1 - k_browse], BUY, buy)]:
        np.testing.assert_allclose(chain.initial, truth.initial, atol=0.06)
        # the chain its own rows' counts give (rare pages are few), and near the truth
        np.testing.assert_allclose(chain.transitions, _counted(own, PAGES)[1], atol=0.02)
        np.testing.assert_allclose(chain.transitions, truth.transitions, atol=0.12)
    labels = fit.seq_posterior(fit.encoder().encode(rows)).argmax(axis=1)
    assert (labels[:600] == k_browse).mean() > 0.98 and (labels[600:] != k_browse).mean() > 0.98


def test_as_a_record_field_with_missing_sessions():
    rng = np.random.default_rng(2)
    paths = BROWSE.sampler(rng, sample_length=6).sample(200)
    rows = [{"path": None if i % 5 == 0 else p, "plan": "pro" if i % 3 else "free"}
            for i, p in enumerate(paths)]
    est = RecordEstimator({"path": OptionalEstimator(MarkovChainEstimator(PAGES)),
                           "plan": CategoricalEstimator()})
    fit = mixfold.optimize(rows, est, progress=False)
    present = [r["path"] for r in rows if r["path"] is not None]
    chain = fit.fields["path"].inner
    np.testing.assert_allclose(chain.transitions, _counted(present, PAGES)[1], rtol=1e-12)
    assert fit.fields["path"].p_missing == pytest.approx(40 / 200)


def test_a_missing_level_inside_a_sequence_names_row_and_position():
    with pytest.raises(DataError) as err:
        mixfold.optimize([["home", "list"], ["home", None, "cart"]], MarkovChainEstimator(),
                         progress=False)
    assert err.value.row == 1 and "missing" in str(err.value)
    assert tuple(err.value.path) == (1,)


def test_as_the_emission_of_a_hidden_markov_model():
    # each row a user's history of sessions; the hidden state (browsing / buying phase) persists
    from mixfold import HiddenMarkovDistribution
    truth = HiddenMarkovDistribution(
        [MarkovChainDistribution(BROWSE.initial, BROWSE.transitions, PAGES,
                                 CategoricalDistribution([1.0], levels=[8])),
         MarkovChainDistribution(BUY.initial, BUY.transitions, PAGES,
                                 CategoricalDistribution([1.0], levels=[8]))],
        [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    rows = truth.sampler(3, sample_length=10).sample(150)
    est = HiddenMarkovEstimator([MarkovChainEstimator(PAGES, CategoricalEstimator())] * 2)
    fit = mixfold.optimize(rows, est, seed=0, progress=False)
    k = int(np.argmax([e.initial[0] for e in fit.emissions]))
    order = [k, 1 - k]
    np.testing.assert_allclose(fit.transitions[np.ix_(order, order)], truth.transitions,
                               atol=0.05)
    np.testing.assert_allclose(fit.emissions[k].transitions, BROWSE.transitions, atol=0.05)
    assert (fit.viterbi(rows[0]) == np.array(order)[truth.viterbi(rows[0])]).all()


def test_sampler_walks_the_chain():
    rows = BROWSE.sampler(7, sample_length=2000).sample(3)
    _, transitions = _counted(rows, PAGES)
    np.testing.assert_allclose(transitions, BROWSE.transitions, atol=0.04)
    with pytest.raises(ValueError, match="no length law"):
        BROWSE.sampler(0).sample(2)


def test_contract_payload_file_decomposition(tmp_path):
    rng = np.random.default_rng(4)
    rows = BROWSE.sampler(rng, sample_length=5).sample(50) + [[]]
    check_payload_halves(MarkovChainEstimator(length=CategoricalEstimator()), rows,
                         MarkovChainDistribution(BUY.initial, BUY.transitions, PAGES,
                                                 CategoricalDistribution([0.9, 0.1], [5, 0])),
                         rng)
    with_length = MarkovChainDistribution(BROWSE.initial, BROWSE.transitions,
                                          ["a", 1, ("x", 2), 2.5], PoissonDistribution(3.0))
    check_model_file(with_length, tmp_path)
    check_model_file(BROWSE, tmp_path)
    check_decomposition(BROWSE)
    assert BROWSE.n_parameters() == 3 + 12


@pytest.mark.parametrize("bad, match", [
    (dict(initial=[0.5, 0.6], transitions=[[1, 0], [0, 1]]), "initial must sum to 1"),
    (dict(initial=[0.5, 0.5], transitions=[[1, 0]]), r"transitions must have shape \(2, 2\)"),
    (dict(initial=[1.0], transitions=[[1.0]], levels=["a", "b"]), "levels must be 1 distinct"),
])
def test_bad_parameters_are_one_clear_error(bad, match):
    with pytest.raises(ParameterError, match=match):
        MarkovChainDistribution(**bad)


def test_bad_option_names_the_option():
    with pytest.raises(ValueError, match="pseudo_count"):
        MarkovChainEstimator(pseudo_count=-1)


@pytest.mark.slow
def test_mixture_on_dask_equals_local():
    rng = np.random.default_rng(8)
    rows = BROWSE.sampler(rng, sample_length=10).sample(300) + \
        BUY.sampler(rng, sample_length=10).sample(200)
    est = MixtureEstimator([MarkovChainEstimator(PAGES)] * 2)
    local = mixfold.fit(rows, est, max_iter=10, tol=0.0, seed=2, progress=False)
    dask = mixfold.fit(rows, est, max_iter=10, tol=0.0, seed=2, backend="dask", num_workers=2,
                       progress=False)
    np.testing.assert_allclose(dask.log_likelihood, local.log_likelihood, rtol=1e-10)
    for a, b in zip(dask.model.components, local.model.components):
        np.testing.assert_allclose(a.transitions, b.transitions, rtol=1e-9, atol=1e-12)
