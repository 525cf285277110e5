"""The example modules behind the documentation's gallery reach real outcomes, each checked
against an independent reference."""

from collections import Counter

import numpy as np
import pytest


@pytest.mark.slow
def test_stock_regimes_match_hmmlearn():
    pytest.importorskip("matplotlib")
    hmm = pytest.importorskip("hmmlearn.hmm")
    from mixfold.examples import stock_regimes

    _, prices = stock_regimes.load_prices()
    out = stock_regimes.fit_regimes(prices)
    returns = out["returns"]
    assert len(returns) == 1046 and set(np.unique(out["path"])) == {0, 1}
    assert out["sd"][1] > 2 * out["sd"][0]  # a turbulent regime well apart from the calm one
    # hmmlearn, best of five starts, reaches the same optimum
    best = max((hmm.GaussianHMM(2, "diag", n_iter=500, tol=1e-8, random_state=s)
                .fit(returns[:, None]) for s in range(5)),
               key=lambda m: m.score(returns[:, None]))
    ours = out["model"].fit_result.final_log_likelihood  # one row: the whole sequence
    assert ours == pytest.approx(best.score(returns[:, None]), abs=1e-3)
    assert np.sort(np.sqrt(best.covars_.ravel())) == pytest.approx(out["sd"], rel=1e-3)


def test_stdlib_topics_beat_the_unigram_model():
    from mixfold.examples import stdlib_topics

    docs = stdlib_topics.stdlib_documents(max_modules=60)
    model = stdlib_topics.fit_topics(docs, topics=4, max_iter=15)
    counts = Counter(w for d in docs for w in d)
    p = np.array(list(counts.values()), dtype=float) / sum(counts.values())
    unigram_perplexity = np.exp(-(p * np.log(p)).sum())  # one topic: the words' frequencies
    assert model.perplexity(docs) < 0.95 * unigram_perplexity
    assert all(len(words) == 8 for words in model.top_words(8))


def test_online_stream_reaches_the_batch_fit():
    from mixfold.examples import online_stream

    out = online_stream.run(blocks=20)
    assert out["rows_seen"][-1] == 10_000
    assert abs(out["scores"][-1] - out["batch_score"]) < 0.01
    assert abs(out["batch_score"] - out["truth_score"]) < 0.01
    assert out["scores"][-1] > out["scores"][0] - 1e-9


def test_heterogeneous_plan_runs_the_planned_bands():
    from mixfold.examples import heterogeneous_plan

    out = heterogeneous_plan.run()
    plan = out["plan"]
    # a budget of 1e-4: float32's a-priori error (6e-5) meets it, so "either" runs float32 too
    assert [(a.name, a.precision, a.rows) for a in plan.assignments] == [
        ("fast", "float32", 10909), ("either", "float32", 5455), ("plain", "float64", 3636)]
    assert out["largest_mean_difference"] < 1e-4  # float32 rows agree with float64's fit
    plan, report = heterogeneous_plan.simulated_pool(n_workers=200)
    assert report.lower_bound <= report.makespan < report.uniform_makespan


def test_variational_components_finds_the_four_groups():
    from mixfold.examples import variational_components

    out = variational_components.run(rows=1200)
    assert out["used"] == 4
    assert (out["em_weights"] > 0.01).sum() > 4
    assert out["ari"] > 0.95
    assert np.all(np.diff(out["lower_bound"]) >= -1e-9 * abs(out["lower_bound"][-1]))
