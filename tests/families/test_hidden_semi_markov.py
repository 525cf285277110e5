"""Explicit-duration HMMs: exact against the expanded-state HMM, Viterbi against enumeration,
recovery of known parameters, the family contract, one backend."""

import itertools
import warnings

import numpy as np
import pytest

import mixfold
from mixfold import (CategoricalDistribution, CategoricalEstimator, GaussianDistribution,
                     GaussianEstimator, HiddenMarkovDistribution, HiddenSemiMarkovDistribution,
                     HiddenSemiMarkovEstimator, NegativeBinomialDistribution,
                     NegativeBinomialEstimator, OptionalEstimator, PoissonDistribution,
                     PoissonEstimator)
from mixfold.compute import kernels as kernels_module
from mixfold.compute.kernels import hmm_forward_backward, hsmm_forward_backward
from mixfold.compute.semi_markov import segment_forward_backward
from mixfold.errors import DataError, ParameterError
from mixfold.families import hidden_semi_markov
from mixfold.families._protocol import InitRandom
from tests.families.family_checks import (check_decomposition, check_model_file,
                                          check_payload_halves)
from tests.parallel.test_model_parallel import (assert_same_bits, cut_plan, fit_pair,
                                                serial_and_threaded)

D = 6


def _model(durations, d=D):
    return HiddenSemiMarkovDistribution(
        [GaussianDistribution(-1.0, 1.0), GaussianDistribution(0.5, 0.7),
         GaussianDistribution(2.0, 1.5)], durations,
        [0.5, 0.3, 0.2], [[0.0, 0.6, 0.4], [0.7, 0.0, 0.3], [0.5, 0.5, 0.0]], max_duration=d)


DURATION_LAWS = {
    "poisson": [PoissonDistribution(2.0), PoissonDistribution(4.0), PoissonDistribution(1.0)],
    "negative_binomial": [NegativeBinomialDistribution(3.0, 0.5),
                          NegativeBinomialDistribution(1.5, 0.3),
                          NegativeBinomialDistribution(5.0, 0.8)],
    "categorical": [CategoricalDistribution([0.1, 0.2, 0.3, 0.1, 0.2, 0.1], list(range(1, 7))),
                    CategoricalDistribution([0.5, 0.5], [2, 5]),
                    CategoricalDistribution([0.3, 0.3, 0.4], [1, 3, 6])],
}


def expanded_hmm(hsmm):
    """The same law as an ordinary HMM over (state, remaining steps) pairs."""
    s, d = hsmm.num_states, hsmm.max_duration
    p = np.exp(hsmm.duration_table)
    initial = (hsmm.initial[:, None] * p).ravel()
    step = np.zeros((s * d, s * d))
    for a in range(s):
        for r in range(1, d):
            step[a * d + r, a * d + r - 1] = 1.0
        step[a * d] = (hsmm.transitions[a][:, None] * p).ravel()
    return HiddenMarkovDistribution([e for e in hsmm.emissions for _ in range(d)], initial,
                                    step)


def _rows(rng, lengths=(1, 2, 5, 9, 17, 40, 0, 3)):
    return [list(rng.normal(0.5, 1.5, size=n)) for n in lengths]


@pytest.fixture(params=[True, False], ids=["compiled", "numpy"])
def kernels(request, monkeypatch):
    monkeypatch.setattr(hidden_semi_markov, "kernels_available", lambda: request.param)
    return request.param


@pytest.mark.parametrize("law", DURATION_LAWS)
def test_equals_the_expanded_state_hmm(law, kernels):
    hsmm = _model(DURATION_LAWS[law])
    hmm = expanded_hmm(hsmm)
    rows = _rows(np.random.default_rng(1))
    enc = hsmm.encoder().encode(rows)
    np.testing.assert_allclose(hsmm.seq_log_density(enc), hmm.seq_log_density(enc),
                               rtol=1e-12, atol=1e-10)
    ours = hsmm.seq_posterior(enc)
    theirs = hmm.seq_posterior(enc).reshape(-1, hsmm.num_states, D).sum(axis=2)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-10)


def test_expected_counts_equal_the_expanded_state_hmm():
    """Initial, transition and duration counts (a censored last segment spread over the
    durations it allows) against the expanded HMM's, compiled and NumPy."""
    hsmm = _model(DURATION_LAWS["categorical"])
    hmm = expanded_hmm(hsmm)
    rng = np.random.default_rng(2)
    rows = _rows(rng)
    enc = hsmm.encoder().encode(rows)
    w = rng.uniform(0.5, 2.0, size=len(rows))
    scores = hsmm.emission_log_densities(enc.items)
    _, _, initial, moves, _ = hmm_forward_backward(np.repeat(scores, D, axis=1), enc.offsets,
                                                   hmm.initial, hmm.transitions,
                                                   np.ones(3 * D), w)
    segment_starts = initial.reshape(3, D) + sum(moves[a * D].reshape(3, D) for a in range(3))
    transitions = moves[::D].reshape(3, 3, D).sum(axis=2)
    for run in (hsmm_forward_backward, segment_forward_backward):
        stats = run(scores, enc.offsets, hsmm._laws, w)
        np.testing.assert_allclose(stats.initial, initial.reshape(3, D).sum(axis=1), atol=1e-10)
        np.testing.assert_allclose(stats.transitions, transitions, atol=1e-10)
        np.testing.assert_allclose(stats.durations, segment_starts, atol=1e-10)


def _brute_force_path(hsmm, x):
    """The best segmentation by enumerating every one (short sequences only)."""
    laws, n = hsmm._laws, len(x)
    e = np.array([[em.log_density(v) for em in hsmm.emissions] for v in x])
    best, path = -np.inf, None
    for cuts in itertools.product([False, True], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        segs = list(zip(bounds, bounds[1:]))
        if max(b - a for a, b in segs) > hsmm.max_duration:
            continue
        for states in itertools.product(range(hsmm.num_states), repeat=len(segs)):
            lp = laws.log_init[states[0]]
            for i, ((a, b), st) in enumerate(zip(segs, states)):
                last = i == len(segs) - 1
                lp += (laws.log_surv if last else laws.log_dur)[st, b - a - 1] + e[a:b, st].sum()
                if not last:
                    lp += laws.log_trans[st, states[i + 1]]
            if lp > best:
                best, path = lp, np.repeat(states, [b - a for a, b in segs])
    return path


def test_viterbi_is_the_best_segmentation():
    hsmm = _model(DURATION_LAWS["poisson"], d=4)
    rng = np.random.default_rng(3)
    rows = [list(rng.normal(0.5, 1.5, size=n)) for n in (1, 3, 5, 7, 7)]
    paths = hsmm.seq_viterbi(hsmm.encoder().encode(rows))
    offsets = np.cumsum([0] + [len(r) for r in rows])
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(paths[offsets[i]:offsets[i + 1]],
                                      _brute_force_path(hsmm, row))


def test_recovers_known_gaussian_emissions_and_categorical_durations():
    truth = HiddenSemiMarkovDistribution(
        [GaussianDistribution(-2.0, 1.0), GaussianDistribution(2.0, 1.0)],
        [CategoricalDistribution([0.5, 0.5], [2, 8]),
         CategoricalDistribution([0.2, 0.8], [3, 5])],
        [0.5, 0.5], [[0.0, 1.0], [1.0, 0.0]], max_duration=10)
    rows = truth.sampler(4, sample_length=80).sample(150)
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 2,
                                    [CategoricalEstimator(levels=range(1, 11))] * 2,
                                    max_duration=10)
    fit = mixfold.optimize(rows, est, seed=0, progress=False)
    order = np.argsort([e.mu for e in fit.emissions])
    np.testing.assert_allclose([fit.emissions[k].mu for k in order], [-2, 2], atol=0.05)
    want = np.exp(truth.duration_table)
    np.testing.assert_allclose(np.exp(fit.duration_table[order]), want, atol=0.05)


def test_recovers_negative_binomial_durations_and_em_is_monotone():
    truth = HiddenSemiMarkovDistribution(
        [GaussianDistribution(-2.0, 1.0), GaussianDistribution(0.0, 0.5),
         GaussianDistribution(2.5, 1.0)],
        [NegativeBinomialDistribution(6.0, 0.5)] * 3,
        [1 / 3] * 3, [[0.0, 0.5, 0.5], [0.5, 0.0, 0.5], [0.5, 0.5, 0.0]], max_duration=40)
    rows = truth.sampler(5, sample_length=100).sample(80)
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 3,
                                    [NegativeBinomialEstimator()] * 3, max_duration=40)
    res = mixfold.fit(rows, est, seed=1, max_iter=60, progress=False)
    ll = np.asarray(res.log_likelihood)
    assert (np.diff(ll) >= -1e-8 * np.abs(ll[1:])).all()
    means = [np.exp(t) @ np.arange(1, 41) for t in res.model.duration_table]
    np.testing.assert_allclose(means, np.exp(truth.duration_table[0]) @ np.arange(1, 41),
                               rtol=0.1)


def test_sampled_segments_follow_the_duration_laws():
    hsmm = _model(DURATION_LAWS["categorical"])
    states = hsmm._states(4000, 30, np.random.default_rng(6)).reshape(4000, 30)
    change = np.diff(states, axis=1) != 0  # the diagonal is zero: a change is a new segment
    first_len = np.argmax(change, axis=1) + 1
    ok = change.any(axis=1)  # the first segment ended inside the row
    for s in range(3):
        mine = ok & (states[:, 0] == s)
        freq = np.bincount(first_len[mine], minlength=D + 1)[1:] / mine.sum()
        np.testing.assert_allclose(freq, np.exp(hsmm.duration_table[s]), atol=0.04)
    np.testing.assert_allclose(np.bincount(states[:, 0]) / 4000, hsmm.initial, atol=0.03)
    rows = hsmm.sampler(0, sample_length=7).sample(3)
    assert [len(r) for r in rows] == [7, 7, 7]
    with pytest.raises(ValueError, match="sample_length"):
        hsmm.sampler(0).sample(2)


def test_missing_items_are_errors_or_optional_emissions():
    rows = [[0.1, -0.3, 1.2], [0.4, None, 2.0]]
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 2, [PoissonEstimator()] * 2,
                                    max_duration=5)
    with pytest.raises(DataError) as err:
        mixfold.optimize(rows, est, progress=False)
    assert err.value.row == 1 and tuple(err.value.path) == (1,)
    optional = HiddenSemiMarkovEstimator([OptionalEstimator(GaussianEstimator())] * 2,
                                         [PoissonEstimator()] * 2, max_duration=5)
    rng = np.random.default_rng(7)
    rows = [[None if rng.random() < 0.1 else float(v) for v in rng.normal(size=20)]
            for _ in range(30)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", mixfold.DegenerateFitWarning)
        fit = mixfold.optimize(rows, optional, seed=0, max_iter=5, progress=False)
    assert np.isfinite(fit.seq_log_density(fit.encoder().encode(rows))).all()


def test_contract_payload_file_decomposition(tmp_path):
    rng = np.random.default_rng(8)
    model = _model(DURATION_LAWS["poisson"])
    rows = model.sampler(rng, sample_length=12).sample(40) + [[]]
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 3, [PoissonEstimator()] * 3,
                                    max_duration=D)
    fit = check_payload_halves(est, rows, model, rng)
    assert fit.transitions.diagonal().tolist() == [0.0, 0.0, 0.0]
    for law in DURATION_LAWS.values():
        check_model_file(_model(law), tmp_path)
    dc = check_decomposition(model)
    assert dc.num_units == 3
    assert model.n_parameters() == 2 + 3 + 6 + 3
    assert model.log_density([]) == 0.0


@pytest.mark.parametrize("bad, match", [
    (dict(durations=[PoissonDistribution(1.0)]), "durations must be one law per state"),
    (dict(max_duration=0), r"max_duration must be an integer in \[1, 1000000\], got 0"),
    (dict(max_duration=10**9), "max_duration must be an integer in"),
    (dict(transitions=[[0.5, 0.4], [1.0, 0.0]]), "transitions must sum to 1"),
    (dict(durations=[CategoricalDistribution([1.0], [9])] * 2), "no probability to 1..5"),
])
def test_bad_parameters_are_one_clear_error(bad, match):
    args = dict(emissions=[GaussianDistribution(0, 1)] * 2, durations=[PoissonDistribution(2.0)]
                * 2, initial=[0.5, 0.5], transitions=[[0.0, 1.0], [1.0, 0.0]], max_duration=5)
    with pytest.raises(ParameterError, match=match):
        HiddenSemiMarkovDistribution(**{**args, **bad})


def test_bad_options_name_the_option():
    with pytest.raises(ValueError, match="max_duration"):
        HiddenSemiMarkovEstimator([GaussianEstimator()], [PoissonEstimator()], max_duration=0)
    with pytest.raises(ValueError, match="one estimator per state"):
        HiddenSemiMarkovEstimator([GaussianEstimator()] * 2, [PoissonEstimator()])


@pytest.mark.slow
def test_mp_backend_equals_local():
    truth = _model(DURATION_LAWS["poisson"], d=12)
    rows = truth.sampler(9, sample_length=50).sample(120)
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 3, [PoissonEstimator()] * 3,
                                    max_duration=12)
    local = mixfold.fit(rows, est, max_iter=6, tol=0.0, seed=2, progress=False)
    mp = mixfold.fit(rows, est, max_iter=6, tol=0.0, seed=2, backend="mp", num_workers=2,
                     progress=False)
    np.testing.assert_allclose(mp.log_likelihood, local.log_likelihood, rtol=1e-10)
    np.testing.assert_allclose(mp.model.transitions, local.model.transitions, rtol=1e-9)
    for a, b in zip(mp.model.durations, local.model.durations):
        assert a.lam == pytest.approx(b.lam, rel=1e-9)


def test_states_scored_and_added_apart_are_bit_identical(kernels):
    model = _model(DURATION_LAWS["negative_binomial"])
    rows = model.sampler(0, sample_length=12).sample(200) + [[]]
    assert_same_bits(*serial_and_threaded(model, rows, cut_plan(model, "", (1, 3)))[:2])


def test_model_parallel_fit_equals_the_serial_fit_bit_for_bit():
    rows = _model(DURATION_LAWS["poisson"]).sampler(1, sample_length=30).sample(60)
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 3, [PoissonEstimator()] * 3,
                                    max_duration=D)
    serial, threaded = fit_pair(rows, est, max_iter=4, tol=0.0, seed=2)
    assert threaded.backend == "model_parallel"
    assert threaded.model == serial.model
    assert threaded.log_likelihood == serial.log_likelihood


def test_compiled_row_blocks_on_threads_equal_the_numpy_reference(monkeypatch):
    monkeypatch.setattr(kernels_module, "HMM_SERIAL_WORK", 0)  # the threaded path at any size
    model = _model(DURATION_LAWS["categorical"])
    rows = model.sampler(2, sample_length=25).sample(150) + [[]]
    enc = model.encoder().encode(rows)
    scores = model.emission_log_densities(enc.items)
    w = np.random.default_rng(3).uniform(0, 2, size=enc.n_rows)
    for _ in range(3):  # both ways of MeasuredThreads
        compiled = hsmm_forward_backward(scores, enc.offsets, model._laws, w)
        reference = segment_forward_backward(scores, enc.offsets, model._laws, w)
        for a, b in zip(compiled, reference):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-11)


def test_seeded_initialisation_is_chunk_independent():
    model = _model(DURATION_LAWS["categorical"])
    enc = model.encoder().encode(model.sampler(0, sample_length=5).sample(10) + [[]])
    est = HiddenSemiMarkovEstimator([GaussianEstimator()] * 3,
                                    [CategoricalEstimator(levels=range(1, D + 1))] * 3,
                                    max_duration=D).bind(model.encoder())
    whole = est.accumulator_factory().make()
    whole.seq_initialize(enc, np.ones(enc.n_rows), InitRandom(9))
    parts = est.accumulator_factory().make()
    for begin in range(0, enc.n_rows, 3):
        part = enc.rows(begin, begin + 3)
        parts.seq_initialize(part, np.ones(part.n_rows), InitRandom(9))
    parts.align_references(whole)
    np.testing.assert_allclose(parts.to_array(), whole.to_array(), rtol=1e-13, atol=1e-12)
    assert whole.occupancy.sum() == pytest.approx(50.0)  # every item's posterior sums to one
    guess = est.estimate(11.0, whole.value())
    assert np.isfinite(guess.seq_log_density(enc)).all()
