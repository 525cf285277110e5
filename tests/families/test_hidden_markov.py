import itertools
import json

import numpy as np
import pytest
from scipy.special import logsumexp

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, DataError, Distribution,
                     ExponentialDistribution, GaussianDistribution, GaussianEstimator,
                     MixtureDistribution, MixtureEstimator, ParameterError, RecordDistribution)
from mixfold.families._protocol import InitRandom
from mixfold.families.diagonal_gaussian import (DiagonalGaussianDistribution,
                                                DiagonalGaussianEstimator)
from mixfold.families.hidden_markov import (HiddenMarkovAccumulator, HiddenMarkovDistribution,
                                            HiddenMarkovEstimator)

# ---------------------------------------------------------------------------------------------
# Brute force: enumerate every state path, scoring items one by one with log_density


def path_log_weights(hmm, seq):
    """{path: log p(path, seq)} over all S**T paths."""
    s = hmm.num_states
    emit = np.array([[hmm.emissions[k].log_density(x) for k in range(s)] for x in seq])
    with np.errstate(divide="ignore"):
        log_init, log_a = np.log(hmm.initial), np.log(hmm.transitions)
        log_stop = None if hmm.terminal is None else np.log(hmm.terminal)
        log_go = None if hmm.terminal is None else np.log1p(-hmm.terminal)
    out = {}
    for path in itertools.product(range(s), repeat=len(seq)):
        lw = log_init[path[0]] + emit[0, path[0]]
        for t in range(1, len(seq)):
            lw += log_a[path[t - 1], path[t]] + emit[t, path[t]]
            if log_go is not None:
                lw += log_go[path[t - 1]]
        if log_stop is not None:
            lw += log_stop[path[-1]]
        out[path] = lw
    return out


def brute_log_density(hmm, seq):
    if len(seq) == 0:
        return 0.0 if hmm.terminal is None else -np.inf
    return logsumexp(list(path_log_weights(hmm, seq).values()))


def brute_posterior(hmm, seq):
    paths = path_log_weights(hmm, seq)
    total = logsumexp(list(paths.values()))
    post = np.zeros((len(seq), hmm.num_states))
    for path, lw in paths.items():
        post[np.arange(len(seq)), path] += np.exp(lw - total)
    return post


def brute_viterbi(hmm, seq):
    paths = path_log_weights(hmm, seq)
    return list(max(paths, key=paths.get))


def brute_counts(hmm, seqs, weights):
    """Expected (initial, transition, stop) counts by enumeration."""
    s = hmm.num_states
    init, trans, stop = np.zeros(s), np.zeros((s, s)), np.zeros(s)
    for seq, w in zip(seqs, weights):
        if not len(seq):
            continue
        paths = path_log_weights(hmm, seq)
        total = logsumexp(list(paths.values()))
        for path, lw in paths.items():
            p = w * np.exp(lw - total)
            init[path[0]] += p
            stop[path[-1]] += p
            for a, b in zip(path, path[1:]):
                trans[a, b] += p
    return init, trans, stop


# ---------------------------------------------------------------------------------------------
# Tiny models of several emission families


def gaussian_hmm(terminal=None):
    return HiddenMarkovDistribution([GaussianDistribution(-1.0, 0.7),
                                     GaussianDistribution(1.5, 2.0)],
                                    [0.3, 0.7], [[0.8, 0.2], [0.35, 0.65]], terminal)


def categorical_hmm(terminal=None):
    levels = ["a", "b", "c"]
    return HiddenMarkovDistribution(
        [CategoricalDistribution([0.7, 0.2, 0.1], levels=levels),
         CategoricalDistribution([0.1, 0.6, 0.3], levels=levels),
         CategoricalDistribution([0.25, 0.25, 0.5], levels=levels)],
        [0.5, 0.2, 0.3], [[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.3, 0.3, 0.4]], terminal)


def mixture_hmm(terminal=None):
    def mix(a, b, w):
        return MixtureDistribution([GaussianDistribution(a, 1.0), GaussianDistribution(b, 0.5)],
                                   [w, 1 - w])
    return HiddenMarkovDistribution([mix(-2.0, 0.0, 0.4), mix(1.0, 3.0, 0.7)], [0.6, 0.4],
                                    [[0.7, 0.3], [0.4, 0.6]], terminal)


def record_hmm(terminal=None):
    def rec(mu, p):
        return RecordDistribution({"x": GaussianDistribution(mu, 1.0),
                                   "kind": CategoricalDistribution({"u": p, "v": 1 - p})})
    return HiddenMarkovDistribution([rec(-1.0, 0.8), rec(1.0, 0.3)], [0.5, 0.5],
                                    [[0.9, 0.1], [0.25, 0.75]], terminal)


def mixed_family_hmm(terminal=None):
    # Gaussian and Exponential read the items differently: two encodings of the same items
    return HiddenMarkovDistribution([GaussianDistribution(1.0, 1.0), ExponentialDistribution(0.5)],
                                    [0.4, 0.6], [[0.5, 0.5], [0.1, 0.9]], terminal)


def draw_items(hmm, n, rng):
    """``n`` plausible items for ``hmm``, drawn from its emissions (any family); with an
    Exponential emission only from it, so every item is in every emission's domain."""
    pool = [e for e in hmm.emissions if isinstance(e, ExponentialDistribution)] or hmm.emissions
    return [pool[rng.integers(len(pool))].sampler(rng).sample() for _ in range(n)]


def tiny_rows(hmm, rng, lengths=(0, 1, 2, 3, 4, 5, 3, 1, 5, 2)):
    items = draw_items(hmm, sum(lengths), rng)
    ends = np.cumsum(lengths)
    rows = [items[e - n:e] for e, n in zip(ends, lengths)]
    return [[v.item() if isinstance(v, np.generic) else v for v in r] for r in rows]


MODELS = [gaussian_hmm, categorical_hmm, mixture_hmm, record_hmm, mixed_family_hmm]
TERMINALS = {gaussian_hmm: [0.2, 0.4], categorical_hmm: [0.1, 0.3, 0.5],
             mixture_hmm: [0.3, 0.3], record_hmm: [0.05, 0.5], mixed_family_hmm: [0.5, 0.2]}


def with_terminal(make, terminal):
    return make(TERMINALS[make] if terminal else None)


# ---------------------------------------------------------------------------------------------
# Scoring, posteriors and Viterbi against enumeration


@pytest.mark.parametrize("terminal", [False, True])
@pytest.mark.parametrize("make", MODELS)
def test_log_density_equals_enumeration_over_paths(make, terminal, rng):
    hmm = with_terminal(make, terminal)
    rows = tiny_rows(hmm, rng)
    got = hmm.seq_log_density(hmm.encoder().encode(rows))
    expected = [brute_log_density(hmm, r) for r in rows]
    np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("make", MODELS)
def test_posteriors_and_viterbi_equal_enumeration(make, rng):
    hmm = with_terminal(make, terminal=True)
    rows = [r for r in tiny_rows(hmm, rng) if r]
    enc = hmm.encoder().encode(rows)
    post, paths = hmm.seq_posterior(enc), hmm.seq_viterbi(enc)
    assert post.shape == (enc.items.n_rows, hmm.num_states) and paths.dtype == np.int64
    for i, r in enumerate(rows):
        cut = slice(enc.offsets[i], enc.offsets[i + 1])
        np.testing.assert_allclose(post[cut], brute_posterior(hmm, r), rtol=1e-10, atol=1e-14)
        assert paths[cut].tolist() == brute_viterbi(hmm, r)
        assert hmm.viterbi(r).tolist() == brute_viterbi(hmm, r)
    np.testing.assert_allclose(hmm.posterior(rows[0]), brute_posterior(hmm, rows[0]), rtol=1e-10)


@pytest.mark.parametrize("terminal", [False, True])
@pytest.mark.parametrize("make", [categorical_hmm, gaussian_hmm])
def test_expected_counts_equal_enumeration(make, terminal, rng):
    hmm = with_terminal(make, terminal)
    rows = tiny_rows(hmm, rng)
    weights = rng.uniform(0.2, 2.0, size=len(rows))
    acc = hmm.estimator().bind(hmm.encoder()).accumulator_factory().make()
    assert isinstance(acc, HiddenMarkovAccumulator)
    ll = acc.seq_update(hmm.encoder().encode(rows), weights, hmm)
    np.testing.assert_allclose(ll, [brute_log_density(hmm, r) for r in rows], rtol=1e-12)
    init, trans, stop = brute_counts(hmm, rows, weights)
    np.testing.assert_allclose(acc.initial, init, rtol=1e-11)
    np.testing.assert_allclose(acc.transitions, trans, rtol=1e-11)
    if terminal:
        np.testing.assert_allclose(acc.terminal, stop, rtol=1e-11)
    else:
        assert acc.terminal is None and len(acc.own_arrays()) == 2


def test_stacked_emissions_equal_per_state_scores(rng):
    hmm = gaussian_hmm()
    assert hmm.units.stack is not None and mixture_hmm().units.stack is None
    items = hmm.encoder().encode([rng.normal(size=50).tolist()]).items
    per_state = np.stack([e.seq_log_density(items) for e in hmm.emissions], axis=1)
    np.testing.assert_allclose(hmm.emission_log_densities(items), per_state, rtol=1e-13)


def test_float32_band_is_close_to_float64(rng):
    hmm = gaussian_hmm()
    enc = hmm.encoder().encode(rng.normal(size=(200, 6)))
    np.testing.assert_allclose(hmm.seq_log_density(enc, "float32"), hmm.seq_log_density(enc),
                               rtol=1e-5)


def test_impossible_item_gives_minus_inf_and_zero_posterior():
    hmm = HiddenMarkovDistribution([CategoricalDistribution({"a": 1.0, "b": 0.0}),
                                    CategoricalDistribution({"a": 0.5, "b": 0.5})],
                                   [1.0, 0.0], [[1.0, 0.0], [0.0, 1.0]])
    enc = hmm.encoder().encode([["a", "b"], ["a", "a"]])
    ll = hmm.seq_log_density(enc)
    assert ll[0] == -np.inf and ll[1] == pytest.approx(0.0, abs=1e-15)
    post = hmm.seq_posterior(enc)
    assert np.isfinite(post).all() and post[:2].sum() == 0.0


# ---------------------------------------------------------------------------------------------
# Lengths 0 and 1


def test_length_zero_convention():
    free, ending = gaussian_hmm(), gaussian_hmm([0.2, 0.4])
    assert free.log_density([]) == 0.0
    assert ending.log_density([]) == -np.inf
    assert free.posterior([]).shape == (0, 2) and free.viterbi([]).shape == (0,)
    enc = free.encoder().encode([[], [0.5], []])
    acc = free.estimator().accumulator_factory().make()
    acc.seq_update(enc.rows(0, 1), np.ones(1), free)  # an empty row adds nothing
    assert not acc.to_array().any()


def test_empty_sequences_do_not_change_the_fit(rng):
    rows = gaussian_hmm().sampler(3, sample_length=6).sample(60)
    est = HiddenMarkovEstimator([GaussianEstimator()] * 2)
    a = mixfold.optimize(rows, est, init=gaussian_hmm(), max_iter=5, progress=False)
    padded = [[]] + rows[:30] + [[], []] + rows[30:]
    b = mixfold.optimize(padded, est, init=gaussian_hmm(), max_iter=5, progress=False)
    assert_same_model(a, b, rtol=1e-12)


def test_length_one_sequences_are_a_mixture(rng):
    hmm = gaussian_hmm()
    mix = MixtureDistribution(hmm.emissions, hmm.initial)
    x = rng.normal(0.0, 2.0, size=300)
    rows = [[v] for v in x]
    np.testing.assert_allclose(hmm.seq_log_density(hmm.encoder().encode(rows)),
                               mix.seq_log_density(mix.encoder().encode(x)), rtol=1e-13)
    fit_hmm = mixfold.optimize(rows, HiddenMarkovEstimator([GaussianEstimator()] * 2), init=hmm,
                               max_iter=3, progress=False)
    fit_mix = mixfold.optimize(x, MixtureEstimator([GaussianEstimator()] * 2), init=mix,
                               max_iter=3, progress=False)
    np.testing.assert_allclose(fit_hmm.initial, fit_mix.weights, rtol=1e-12)
    for e, c in zip(fit_hmm.emissions, fit_mix.components):
        assert e.mu == pytest.approx(c.mu, rel=1e-12) and e.sigma2 == pytest.approx(c.sigma2,
                                                                                     rel=1e-12)
    np.testing.assert_allclose(fit_hmm.transitions, 0.5)  # no transition seen: uniform rows


# ---------------------------------------------------------------------------------------------
# Against hmmlearn: the same EM from the same start


def hmmlearn_start(dim):
    means = np.array([[-2.0, 0.5], [0.0, -1.0], [1.5, 1.0]])[:, :dim]
    covars = np.array([[1.0, 0.5], [0.6, 1.2], [1.5, 0.8]])[:, :dim]
    return (np.array([0.5, 0.3, 0.2]),
            np.array([[0.7, 0.2, 0.1], [0.15, 0.7, 0.15], [0.2, 0.2, 0.6]]), means, covars)


def hmmlearn_data(dim, rng):
    truth = HiddenMarkovDistribution(
        [DiagonalGaussianDistribution(m, v) for m, v in
         zip([[-2.5, 0.0], [0.2, -1.5], [2.0, 1.5]], [[0.8, 0.6], [0.5, 1.0], [1.2, 0.7]])],
        [0.6, 0.3, 0.1], [[0.8, 0.15, 0.05], [0.1, 0.8, 0.1], [0.1, 0.2, 0.7]])
    lengths = rng.integers(1, 40, size=60)
    rows = [np.asarray(truth.sampler(rng, sample_length=int(n)).sample())[:, :dim]
            for n in lengths]
    return rows, lengths


@pytest.mark.parametrize("dim", [1, 2])
def test_log_likelihood_trajectory_equals_hmmlearn(dim, rng):
    hmm_mod = pytest.importorskip("hmmlearn.hmm")
    rows, lengths = hmmlearn_data(dim, rng)
    start, trans, means, covars = hmmlearn_start(dim)
    n_iter = 30
    ref = hmm_mod.GaussianHMM(n_components=3, covariance_type="diag", n_iter=n_iter,
                              tol=-np.inf, init_params="", params="stmc", startprob_prior=1.0,
                              transmat_prior=1.0, means_prior=0.0, means_weight=0.0,
                              covars_prior=0.0, covars_weight=1.0, min_covar=0.0)
    ref.startprob_, ref.transmat_, ref.means_, ref.covars_ = start, trans, means, covars
    ref.fit(np.concatenate(rows), lengths)
    history = np.array(ref.monitor_.history)
    assert history.size == n_iter

    if dim == 1:
        rows = [r[:, 0] for r in rows]
        emissions = [GaussianDistribution(m[0], v[0]) for m, v in zip(means, covars)]
        est = HiddenMarkovEstimator([GaussianEstimator(reg_covar=0.0)] * 3)
    else:
        emissions = [DiagonalGaussianDistribution(m, v) for m, v in zip(means, covars)]
        est = HiddenMarkovEstimator([DiagonalGaussianEstimator(reg_covar=0.0)] * 3)
    init = HiddenMarkovDistribution(emissions, start, trans)
    result = mixfold.fit(rows, est, init=init, max_iter=n_iter, tol=0.0, progress=False)
    ours = np.array(result.log_likelihood) * len(rows)  # mean per row -> total, as hmmlearn
    # mixfold stops once an iteration leaves the log-likelihood exactly unchanged
    assert ours.size == n_iter or (result.stop_reason == "converged" and ours.size >= 10)
    rel = np.max(np.abs(ours - history[:ours.size]) / np.abs(history[:ours.size]))
    assert rel < 1e-8, rel
    fit = result.model
    np.testing.assert_allclose(fit.initial, ref.startprob_, rtol=1e-6, atol=1e-10)
    np.testing.assert_allclose(fit.transitions, ref.transmat_, rtol=1e-6, atol=1e-10)
    mu = np.array([np.atleast_1d(e.mu) for e in fit.emissions])
    s2 = np.array([np.atleast_1d(e.sigma2) for e in fit.emissions])
    np.testing.assert_allclose(mu, ref.means_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(s2, np.array([np.diag(c) for c in ref.covars_]), rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# Fitting


def test_sampled_data_recover_parameters():
    truth = HiddenMarkovDistribution(
        [GaussianDistribution(-2.0, 0.5), GaussianDistribution(2.0, 1.0),
         GaussianDistribution(6.0, 0.8)],
        [0.6, 0.3, 0.1], [[0.8, 0.15, 0.05], [0.1, 0.7, 0.2], [0.25, 0.25, 0.5]],
        [0.1, 0.05, 0.2])
    rows = truth.sampler(0).sample(3000)
    est = HiddenMarkovEstimator([GaussianEstimator()] * 3, terminal=True)
    fit = mixfold.optimize(rows, est, seed=2, progress=False)
    order = np.argsort([e.mu for e in fit.emissions])
    np.testing.assert_allclose([fit.emissions[k].mu for k in order], [-2, 2, 6], atol=0.05)
    np.testing.assert_allclose([fit.emissions[k].sigma2 for k in order], [0.5, 1.0, 0.8],
                               atol=0.05)
    np.testing.assert_allclose(fit.initial[order], truth.initial, atol=0.03)
    np.testing.assert_allclose(fit.transitions[np.ix_(order, order)], truth.transitions,
                               atol=0.03)
    np.testing.assert_allclose(fit.terminal[order], truth.terminal, atol=0.02)
    ll = fit.fit_result.log_likelihood
    assert all(b >= a - 1e-9 * abs(a) for a, b in zip(ll, ll[1:]))


def test_categorical_emissions_recover_chain():
    truth = HiddenMarkovDistribution(
        [CategoricalDistribution([0.9, 0.05, 0.05], levels=["a", "b", "c"]),
         CategoricalDistribution([0.05, 0.9, 0.05], levels=["a", "b", "c"])],
        [0.7, 0.3], [[0.9, 0.1], [0.3, 0.7]])
    rows = truth.sampler(1, sample_length=12).sample(2000)
    fit = mixfold.optimize(rows, HiddenMarkovEstimator([CategoricalEstimator()] * 2), seed=0,
                           progress=False)
    order = np.argsort([-e.prob("a") for e in fit.emissions])
    np.testing.assert_allclose(fit.transitions[np.ix_(order, order)], truth.transitions,
                               atol=0.03)
    np.testing.assert_allclose(fit.initial[order], truth.initial, atol=0.03)


def test_chunking_does_not_change_the_fit():
    rows = mixture_hmm([0.2, 0.3]).sampler(4).sample(80)
    est = HiddenMarkovEstimator([GaussianEstimator()] * 2, terminal=True)
    small = mixfold.optimize(rows, est, seed=5, chunk_rows=3, max_iter=15, progress=False)
    large = mixfold.optimize(rows, est, seed=5, chunk_rows=10_000, max_iter=15, progress=False)
    assert_same_model(small, large, rtol=1e-10)
    np.testing.assert_allclose(small.fit_result.log_likelihood, large.fit_result.log_likelihood,
                               rtol=1e-12)


def test_seeded_initialisation_is_chunk_independent():
    hmm = record_hmm()
    enc = hmm.encoder().encode(hmm.sampler(0, sample_length=4).sample(10) + [[]])
    est = hmm.estimator().bind(hmm.encoder())
    whole = est.accumulator_factory().make()
    whole.seq_initialize(enc, np.ones(enc.n_rows), InitRandom(9))
    parts = est.accumulator_factory().make()
    for begin in range(0, enc.n_rows, 3):
        part = enc.rows(begin, begin + 3)
        parts.seq_initialize(part, np.ones(part.n_rows), InitRandom(9))
    # the seeded start sums a Gaussian about its first rows' mean: moved to the whole's
    parts.align_references(whole)
    np.testing.assert_allclose(parts.to_array(), whole.to_array(), rtol=1e-13, atol=1e-12)
    # each item's random posterior sums to one: all counts add up to the item count
    assert whole.initial.sum() + whole.transitions.sum() == pytest.approx(40.0)
    assert est.initial_guess(enc, np.ones(enc.n_rows), InitRandom(9)).num_states == 2


def test_tied_emissions_via_keys_share_parameters():
    rows = categorical_hmm().sampler(2, sample_length=8).sample(300)
    est = HiddenMarkovEstimator([CategoricalEstimator(keys="shared"),
                                 CategoricalEstimator(keys="shared"), CategoricalEstimator()],
                                pseudo_count=0.5)
    fit = mixfold.optimize(rows, est, seed=1, max_iter=20, progress=False)
    assert fit.emissions[0] == fit.emissions[1]
    np.testing.assert_array_equal(fit.emissions[0].probs, fit.emissions[1].probs)
    assert fit.emissions[2] != fit.emissions[0]


def test_hmm_as_mixture_component_and_with_key_on_the_model():
    rows = gaussian_hmm().sampler(0, sample_length=5).sample(100)
    est = MixtureEstimator([HiddenMarkovEstimator([GaussianEstimator()] * 2, keys="chain")] * 2)
    fit = mixfold.optimize(rows, est, seed=0, max_iter=5, progress=False)
    assert fit.components[0] == fit.components[1]


def test_payload_round_trip_and_combine_of_halves(rng):
    hmm = gaussian_hmm([0.3, 0.3])
    enc = hmm.encoder().encode(hmm.sampler(1).sample(40))
    est = hmm.estimator()
    whole, a, b = (est.accumulator_factory().make() for _ in range(3))
    w = rng.uniform(size=40)
    whole.seq_update(enc, w, hmm)
    a.seq_update(enc.rows(0, 17), w[:17], hmm)
    b.seq_update(enc.rows(17, 40), w[17:], hmm)
    np.testing.assert_allclose(a.combine(b).to_array(), whole.to_array(), rtol=1e-12)
    assert whole.payload_size() == 2 + 4 + 2 + 4 + 4  # Gaussians: sums about c, sum w c
    fresh = est.accumulator_factory().make().from_array(whole.to_array())
    np.testing.assert_array_equal(fresh.to_array(), whole.to_array())


# ---------------------------------------------------------------------------------------------
# Sampling, model files, validation, bad input


def test_sampled_lengths_follow_the_terminal_law():
    one = HiddenMarkovDistribution([GaussianDistribution(0.0, 1.0)], [1.0], [[1.0]], [0.25])
    rows = one.sampler(0).sample(20_000)
    assert min(map(len, rows)) >= 1
    assert np.mean([len(r) for r in rows]) == pytest.approx(4.0, rel=0.03)
    with pytest.raises(ValueError, match="sample_length"):
        gaussian_hmm().sampler(0).sample(3)
    assert [len(r) for r in gaussian_hmm().sampler(0, sample_length=3).sample(4)] == [3] * 4
    assert gaussian_hmm().sampler(0, sample_length=0).sample(2) == [[], []]


def test_sampled_states_follow_the_chain():
    hmm = HiddenMarkovDistribution([CategoricalDistribution({"x": 1.0}),
                                    CategoricalDistribution({"y": 1.0})],
                                   [0.2, 0.8], [[0.9, 0.1], [0.4, 0.6]])
    rows = hmm.sampler(3, sample_length=2).sample(40_000)
    first = np.array([r[0] == "x" for r in rows])
    second = np.array([r[1] == "x" for r in rows])
    assert first.mean() == pytest.approx(0.2, abs=0.01)
    assert second[first].mean() == pytest.approx(0.9, abs=0.01)
    assert second[~first].mean() == pytest.approx(0.4, abs=0.01)


@pytest.mark.parametrize("make", MODELS)
def test_to_dict_from_dict_is_exact(make):
    hmm = make(TERMINALS[make])
    back = Distribution.from_dict(json.loads(json.dumps(hmm.to_dict())))
    assert isinstance(back, HiddenMarkovDistribution) and back == hmm
    np.testing.assert_array_equal(back.transitions, hmm.transitions)
    np.testing.assert_array_equal(back.terminal, hmm.terminal)
    fit = mixfold.optimize(gaussian_hmm().sampler(0, sample_length=4).sample(50),
                           HiddenMarkovEstimator([GaussianEstimator()] * 2), max_iter=3,
                           progress=False)
    again = Distribution.from_dict(json.loads(json.dumps(fit.to_dict())))
    assert again == fit and again.terminal is None


def test_parameters_are_validated():
    g = [GaussianDistribution(0, 1), GaussianDistribution(1, 1)]
    with pytest.raises(ParameterError, match="initial"):
        HiddenMarkovDistribution(g, [0.5, 0.6], [[1, 0], [0, 1]])
    with pytest.raises(ParameterError, match="shape"):
        HiddenMarkovDistribution(g, [0.5, 0.5], [[1.0, 0.0]])
    with pytest.raises(ParameterError, match="each row"):
        HiddenMarkovDistribution(g, [0.5, 0.5], [[0.5, 0.4], [0, 1]])
    with pytest.raises(ParameterError, match="terminal"):
        HiddenMarkovDistribution(g, [0.5, 0.5], [[1, 0], [0, 1]], [0.5, 1.5])
    with pytest.raises(ParameterError, match="at least one state"):
        HiddenMarkovDistribution([], [], [])
    with pytest.raises(ValueError, match="pseudo_count"):
        HiddenMarkovEstimator([GaussianEstimator()], pseudo_count=-1.0)
    with pytest.raises(TypeError, match="Estimators"):
        HiddenMarkovEstimator([GaussianDistribution(0, 1)])


def test_bad_input_names_row_and_position():
    est = HiddenMarkovEstimator([GaussianEstimator()] * 2)
    with pytest.raises(DataError) as err:
        mixfold.optimize([[0.1, 0.2], 3.0], est, progress=False)
    assert err.value.row == 1
    with pytest.raises(DataError) as err:
        mixfold.optimize([[0.1, 0.2], [0.3], [0.5, 0.7, float("nan")]], est, progress=False)
    assert err.value.row == 2 and err.value.path == (2,)


def test_terminal_model_reports_an_empty_sequence():
    est = HiddenMarkovEstimator([GaussianEstimator()] * 2, terminal=True)
    with pytest.raises(mixfold.NumericalError, match="row 1"):
        mixfold.optimize([[0.1, 0.2], [], [0.3]], est, progress=False)


def assert_same_model(a, b, rtol):
    """Walk two to_dict() trees; floats equal to ``rtol``, everything else exactly."""
    def walk(x, y, where):
        if isinstance(x, dict):
            assert isinstance(y, dict) and x.keys() == y.keys(), where
            for k in x:
                walk(x[k], y[k], f"{where}.{k}")
        elif isinstance(x, list):
            assert isinstance(y, list) and len(x) == len(y), where
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{where}[{i}]")
        elif isinstance(x, float):
            assert y == pytest.approx(x, rel=rtol, abs=rtol), where
        else:
            assert x == y, where
    walk(a.to_dict(), b.to_dict(), "model")
