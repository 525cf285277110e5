import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.sparse import csr_matrix
from scipy.special import digamma, gammaln, logsumexp

import mixfold
from mixfold.precision import resolve_precision
from mixfold import (CategoricalEstimator, DataError, DataTypeError, LDADistribution, LDAEstimator,
                     MixtureEstimator, ModelFileError, ParameterError, RecordEstimator)
from mixfold.checkpoint import _digest
from mixfold.decomposition import DecompAxis, decomposition_for
from mixfold.families._hooks import whole_range
from mixfold.families._lda_fixed_point import solve, topic_table
from mixfold.families.lda import BagOfWordsEncoder, learn_alpha
from mixfold.parallel.model_decomposition import decompose_model
from mixfold.parallel.model_parallel import (ModelParallelEstimator, model_parallel_fold,
                                             plan_for)
from mixfold.parallel.resources import DeviceSpec, Resources

K, V = 4, 40


def _truth(k=K, v=V, seed=0, mean_length=60.0):
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(v, 0.1), size=k)
    # topics with huge lambda are (almost) the fixed word distributions beta
    return LDADistribution(beta * 1e7, 0.3, vocabulary=range(v), mean_length=mean_length)


@pytest.fixture(scope="module")
def corpus():
    truth = _truth()
    return truth, truth.sampler(1).sample(600)


def _matrix(docs, v=V):
    x = np.zeros((len(docs), v))
    for i, d in enumerate(docs):
        for w, c in d.items():
            x[i, w] = c
    return csr_matrix(x)


# --- encoding ---

def test_encoder_reads_token_lists_mappings_and_strings():
    enc = BagOfWordsEncoder().fit([["b", "a", "b"], {"c": 2.5}, "A b!"])
    assert enc.vocabulary == ("a", "b", "c")
    e = enc.encode([["b", "a", "b"], {"c": 2.5}, "A b!", []])
    assert e.offsets.tolist() == [0, 2, 3, 5, 5]
    assert e.words.tolist() == [0, 1, 2, 0, 1]
    assert e.counts.tolist() == [1.0, 2.0, 2.5, 1.0, 1.0]
    assert e.rows(1, 3).offsets.tolist() == [0, 1, 3]
    taken = e.take(np.array([0, 2]))
    assert taken.words.tolist() == [0, 1, 0, 1] and taken.counts.tolist() == [1, 2, 1, 1]


def test_unknown_words_raise_naming_the_row_or_are_ignored():
    with pytest.raises(DataError, match=r"row 1: word 'z' is not among the 2 words"):
        BagOfWordsEncoder(["a", "b"]).encode([["a"], ["b", "z"]])
    e = BagOfWordsEncoder(["a", "b"], unknown="ignore").encode([["a"], ["b", "z", "z"]])
    assert e.offsets.tolist() == [0, 1, 2] and e.words.tolist() == [0, 1]
    with pytest.raises(DataTypeError, match="row 0"):
        BagOfWordsEncoder(["a"]).encode([3.5])
    with pytest.raises(DataError, match="row 0: the count of word 'a'"):
        BagOfWordsEncoder(["a"]).encode([{"a": -1}])
    with pytest.raises(ValueError, match="unknown must be one of"):
        LDAEstimator(2, unknown="drop")


def test_vocabulary_learnt_per_shard_merges():
    a = BagOfWordsEncoder().fit([["x", "y"]])
    b = BagOfWordsEncoder().fit([["w"]])
    assert a.merge(b).vocabulary == ("w", "x", "y")
    assert a.merge(BagOfWordsEncoder()).vocabulary == ("x", "y")


# --- the bound against an independent computation ---

def _reference_bound(model, docs, gamma):
    """scikit-learn's _approx_bound, written out from the formulas with logsumexp."""
    lam, alpha, eta = model.topics, model.alpha_vector, model.eta
    elog_beta = digamma(lam) - digamma(lam.sum(1))[:, None]
    elog_theta = digamma(gamma) - digamma(gamma.sum(1))[:, None]
    score = 0.0
    for d, doc in enumerate(docs):
        ids = np.array(list(doc.keys()))
        cnt = np.array(list(doc.values()), dtype=float)
        score += cnt @ logsumexp(elog_theta[d][:, None] + elog_beta[:, ids], axis=0)
    score += ((alpha - gamma) * elog_theta).sum() + (gammaln(gamma) - gammaln(alpha)).sum() \
        + (gammaln(alpha.sum()) - gammaln(gamma.sum(1))).sum()
    score += ((eta - lam) * elog_beta).sum() + (gammaln(lam) - gammaln(eta)).sum() \
        + (gammaln(V * eta) - gammaln(lam.sum(1))).sum()
    return score


def test_elbo_matches_the_formula_and_rows_share_the_topics_term(corpus):
    _, docs = corpus
    docs = docs[:50]
    rng = np.random.default_rng(4)
    model = LDADistribution(rng.gamma(100.0, 0.01, (K, V)), [0.1, 0.2, 0.3, 0.4],
                            vocabulary=range(V), doc_tol=1e-10)
    gamma = model.transform(docs)  # normalised; recompute gamma from the fixed point
    enc = model.encoder().encode(docs)
    gamma = solve(enc, model.alpha_vector, topic_table(model.topics, model.eta)[0], whole_range(K),
                  model.doc_iterations, model.doc_tol).gamma  # the solved gamma the bound uses
    assert np.allclose(model.transform(docs), gamma / gamma.sum(1, keepdims=True))
    assert model.elbo(docs) == pytest.approx(_reference_bound(model, docs, gamma), rel=1e-12)
    rows = model.seq_log_density(enc)
    share = model.topics_bound() / (model.topics.sum() - K * V * model.eta)
    assert rows.sum() == pytest.approx(model.elbo(docs) - model.topics_bound()
                                       + share * enc.counts.sum(), rel=1e-12)
    assert model.log_density(docs[3]) == pytest.approx(rows[3], rel=1e-12)


def test_empty_document_scores_zero_and_keeps_its_prior():
    m = LDADistribution([[2.0, 1.0], [1.0, 2.0]], [0.2, 0.6], vocabulary=["a", "b"])
    assert m.log_density([]) == 0.0
    np.testing.assert_allclose(m.transform([[]]), [[0.25, 0.75]])


# --- fitting ---

def _tv_after_matching(found, truth):
    tv = 0.5 * np.abs(found[:, None, :] - truth[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(tv)
    return tv[rows, cols]


def test_topics_of_a_synthetic_corpus_are_recovered(corpus):
    truth, docs = corpus
    fit = mixfold.optimize(docs, LDAEstimator(K, alpha=0.3, vocabulary=range(V)), max_iter=60,
                           seed=1,
                           progress=False)
    tv = _tv_after_matching(fit.topic_word, truth.topic_word)
    # 600 documents of ~60 words: each topic's words are seen ~9,000 times
    assert tv.mean() < 0.04, tv
    assert tv.max() < 0.06, tv


def test_batch_elbo_never_decreases_and_alpha_is_learnt(corpus):
    _, docs = corpus
    # each document's fixed point solved to convergence: the E-step maximises the bound
    res = mixfold.fit(docs[:200], LDAEstimator(K, doc_tol=1e-8, doc_iterations=5000),
                      max_iter=25, tol=0, seed=2, progress=False)
    trace = np.array(res.log_likelihood)
    assert res.stop_reason == "max_iter"
    assert (np.diff(trace) >= -1e-10 * np.abs(trace[1:])).all(), np.diff(trace)
    assert trace[-1] > trace[0]
    # the trace is the whole ELBO per document of the model it scored
    model = res.model
    assert isinstance(model.alpha, np.ndarray) and model.alpha.shape == (K,)
    assert model.estimator().alpha is None  # a refit learns it again
    assert LDADistribution(model.topics, 0.5).estimator().alpha == 0.5


def test_learnt_alpha_maximises_the_dirichlet_objective():
    rng = np.random.default_rng(0)
    theta = rng.dirichlet([0.3, 1.2, 2.0], size=20_000)
    alpha = learn_alpha(20_000.0, np.log(theta).sum(0), np.full(3, 1 / 3))
    np.testing.assert_allclose(alpha, [0.3, 1.2, 2.0], rtol=0.05)


def test_perplexity_within_one_percent_of_scikit_learn(corpus):
    sklearn = pytest.importorskip("sklearn.decomposition")
    _, docs = corpus
    docs = docs[:200]
    x = _matrix(docs)
    peer = sklearn.LatentDirichletAllocation(K, learning_method="batch", max_iter=10,
                                             random_state=5, doc_topic_prior=1 / K,
                                             topic_word_prior=1 / K).fit(x)
    start = np.random.RandomState(5).gamma(100.0, 0.01, (K, V))  # scikit-learn's first topics
    ours = mixfold.optimize(docs, LDAEstimator(K, alpha=1 / K), max_iter=10, tol=0,
                            init=LDADistribution(start, 1 / K, vocabulary=range(V)),
                            progress=False)
    assert ours.perplexity(docs) == pytest.approx(peer.perplexity(x), rel=0.01)


def test_weights_equal_repeated_documents(corpus):
    _, docs = corpus
    docs = docs[:40]
    w = np.random.default_rng(0).integers(0, 3, size=40)
    est = LDAEstimator(K, alpha=0.2, vocabulary=range(V))
    start = est.initial_guess(est.encoder().encode(docs), np.ones(40), mixfold.InitRandom(0))
    a = mixfold.optimize(docs, est, weights=w, init=start, max_iter=3, tol=0, progress=False)
    b = mixfold.optimize([d for d, n in zip(docs, w) for _ in range(n)], est, init=start,
                         max_iter=3, tol=0, progress=False)
    np.testing.assert_allclose(a.topics, b.topics, rtol=1e-10)


def test_online_variational_bayes_through_online_em(corpus):
    truth, docs = corpus
    est = LDAEstimator(K, alpha=0.3, vocabulary=range(V), n_documents=600)
    online = mixfold.OnlineEM(est, init_rows=100, seed=1, step_exponent=0.7, step_offset=10.0)
    for _ in range(4):
        for i in range(0, 600, 100):
            online.partial_fit(docs[i:i + 100])
    batch = mixfold.optimize(docs, est, max_iter=60, seed=1, progress=False)
    assert online.model.perplexity(docs) < 1.05 * batch.perplexity(docs)
    assert _tv_after_matching(online.model.topic_word, truth.topic_word).mean() < 0.12


# --- nesting, files, sampling ---

def test_field_of_a_record_and_component_of_a_mixture(tmp_path):
    rng = np.random.default_rng(1)
    beta = np.full((4, 30), 1e-3)  # two corpora over disjoint halves of the vocabulary
    beta[:2, :15] += rng.dirichlet(np.full(15, 0.3), size=2) * 1e7
    beta[2:, 15:] += rng.dirichlet(np.full(15, 0.3), size=2) * 1e7
    a = LDADistribution(beta[:2], 0.3, vocabulary=range(30), mean_length=40)
    b = LDADistribution(beta[2:], 0.3, vocabulary=range(30), mean_length=40)
    docs = a.sampler(1).sample(50) + b.sampler(2).sample(50)
    mix = mixfold.optimize(docs, MixtureEstimator([LDAEstimator(2)] * 2), max_iter=6, n_init=3,
                           progress=False)
    labels = np.array([mix.posterior(d).argmax() for d in docs])
    assert {labels[:50].mean(), labels[50:].mean()} == {0.0, 1.0}  # the best start separates
    rows = [{"text": d, "plan": "ab"[i >= 50]} for i, d in enumerate(docs)]
    rec = mixfold.optimize(rows, RecordEstimator({"text": LDAEstimator(3),
                                                  "plan": CategoricalEstimator()}),
                           max_iter=5, progress=False)
    assert rec.fields["text"].n_topics == 3
    for model in (mix, rec):
        path = tmp_path / "m.json"
        mixfold.save(model, path)
        assert mixfold.load(path) == model


def test_model_file_is_strict(tmp_path):
    import json
    m = LDADistribution([[1.0, 2.0]], 0.5, vocabulary=["a", "b"])
    path = tmp_path / "m.json"
    mixfold.save(m, path)
    doc = json.loads(path.read_text())
    doc["model"]["extra"] = 1
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="unknown field 'extra'"):
        mixfold.load(path)
    doc["model"].pop("extra")
    doc["model"]["topics"] = [[1.0, -2.0]]
    path.write_text(json.dumps(doc))
    with pytest.raises(ModelFileError, match="must be finite and > 0"):
        mixfold.load(path)


def test_sampler_draws_bags_around_the_mean_length():
    m = _truth(mean_length=30.0)
    docs = m.sampler(0).sample(400)
    assert all(isinstance(d, dict) for d in docs)
    assert np.mean([sum(d.values()) for d in docs]) == pytest.approx(30.0, rel=0.05)


def test_bad_parameters_raise():
    with pytest.raises(ParameterError, match="shape"):
        LDADistribution([1.0, 2.0], 0.5)
    with pytest.raises(ParameterError, match="alpha"):
        LDADistribution([[1.0, 2.0]], [0.5, 0.5])
    with pytest.raises(ValueError, match="n_topics"):
        LDAEstimator(0)
    with pytest.raises(mixfold.precision.BandSupportError, match="float64 only"):
        m = LDADistribution([[1.0, 2.0]], 0.5)
        m.seq_log_density(m.encoder().encode([[0]]), resolve_precision("bfloat16"))


def test_top_words_and_parameters():
    m = LDADistribution([[5.0, 1.0, 4.0], [1.0, 1.0, 8.0]], 0.5, vocabulary=["a", "b", "c"])
    assert [w for w, _ in m.top_words(2)[0]] == ["a", "c"]
    assert m.top_words(1)[1] == [("c", 0.8)]
    assert m.n_parameters() == 4


# --- the TOPIC axis ---

def test_decomposition_declares_the_topic_axis():
    m = _truth()
    dc = decomposition_for(m)
    assert dc.axis is DecompAxis.TOPIC and dc.num_units == K
    assert [u.index for u in dc.units] == list(range(K))


def test_topic_cut_equals_the_serial_fold_to_rounding(corpus):
    _, docs = corpus
    est = LDAEstimator(K, vocabulary=range(V))
    model = est.initial_guess(est.encoder().encode(docs[:10]), np.ones(10), mixfold.InitRandom(0))
    enc = model.encoder().encode(docs)
    plan = plan_for(model, 2)
    assert plan.axis is DecompAxis.TOPIC and [(c.start, c.stop) for c in plan.cuts] == \
        [(0, 2), (2, 4)]
    serial, cut = est.accumulator_factory().make(), est.accumulator_factory().make()
    ll = serial.seq_update(enc, np.ones(len(docs)), model)
    ll_cut = model_parallel_fold(cut, model, enc, np.ones(len(docs)), plan)
    np.testing.assert_allclose(cut.to_array(), serial.to_array(), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ll_cut, ll, rtol=1e-12)
    a = mixfold.optimize(docs, est, max_iter=4, tol=0, progress=False)
    b = mixfold.optimize(docs, est, max_iter=4, tol=0, backend="model_parallel", num_workers=2,
                         progress=False)
    c = mixfold.optimize(docs, ModelParallelEstimator(est, plan), max_iter=4, tol=0,
                         progress=False)
    for other in (b, c):
        np.testing.assert_allclose(other.topics, a.topics, rtol=1e-12)
        np.testing.assert_allclose(other.alpha_vector, a.alpha_vector, rtol=1e-12)


def test_planner_cuts_topics_when_the_model_does_not_fit_one_device():
    m = LDADistribution(np.ones((40, 500)), 0.1, mean_length=10)
    whole = 16 * 40 * 500
    half = Resources((DeviceSpec("a", memory_bytes=int(0.6 * whole) + 16_000),
                      DeviceSpec("b", memory_bytes=int(0.6 * whole) + 16_000)))
    plan = decompose_model(m, half, n_data=10)
    assert plan.is_model_parallel and plan.axis is DecompAxis.TOPIC
    assert [(c.start, c.stop) for c in plan.cuts] == [(0, 20), (20, 40)]
    small = Resources((DeviceSpec("a", memory_bytes=whole // 4),
                       DeviceSpec("b", memory_bytes=whole // 4)))
    with pytest.raises(ValueError):
        decompose_model(m, small, n_data=10)


def test_topic_cut_of_a_record_field(corpus):
    _, docs = corpus
    rows = [{"text": d, "plan": "ab"[i % 2]} for i, d in enumerate(docs[:200])]
    est = RecordEstimator({"text": LDAEstimator(K, vocabulary=range(V)),
                           "plan": CategoricalEstimator()})
    model = mixfold.optimize(rows, est, max_iter=1, progress=False)
    plan = decompose_model(model, Resources((DeviceSpec("a"), DeviceSpec("b"))),
                           prefer_data_parallel=False)
    assert (plan.path, plan.axis) == ("text", DecompAxis.TOPIC)
    enc = model.encoder().encode(rows)
    bound = model.estimator()
    serial, cut = bound.accumulator_factory().make(), bound.accumulator_factory().make()
    serial.seq_update(enc, np.ones(200), model)
    model_parallel_fold(cut, model, enc, np.ones(200), plan)
    np.testing.assert_allclose(cut.to_array(), serial.to_array(), rtol=1e-12, atol=1e-12)


def test_a_checkpoint_written_before_the_encoder_moved_still_resumes():
    # the fingerprints (checkpoint._digest) main's lda.py gave the estimator and encoded rows
    bow = BagOfWordsEncoder(["a", "b", "c"]).encode([["a", "b", "a"], {"c": 2}])
    assert _digest(bow) == "d35ee488b86481f232c2a692d6bab7ad4fe27adda8e141ec5f9debda62d6dd6b"
    assert _digest(LDAEstimator(3, alpha=0.5, vocabulary=["a", "b", "c"])) == \
        "e2e66850083fb9498a988ee91d40473a6bfc1981652c9bf3d0c4a51ff6dcef74"
