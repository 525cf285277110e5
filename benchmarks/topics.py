"""Topic-model benchmark P12: LDA by variational EM, side by side with scikit-learn and gensim.

    python benchmarks/topics.py            # P12 at full size (see SIZES)
    python benchmarks/topics.py --quick    # a smoke run: small corpora, a small cut model
    python benchmarks/topics.py [--iterations N] [--json out.json]

Corpora, one core (BLAS and OpenMP limited to one thread before NumPy loads):

- stdlib: the docstrings of the Python standard library's modules, classes and functions,
  read from its source files with ``ast`` (nothing imported), lower-case words of 3+ letters,
  the vocabulary the words in 5+ documents and at most half of them, documents of 5+ words;
- synthetic: documents drawn from K known topics (Dirichlet(0.05) over V words, alpha 0.1,
  Poisson(80) words per document).

Each library fits the same corpus for the same number of passes with alpha = eta = 1/K:

- mixfold batch: ``optimize(docs, LDAEstimator(K, alpha=1/K))`` from scikit-learn's initial
  topics (the same seeded Gamma(100, 1/100) draw);
- mixfold online: ``OnlineEM`` over blocks of 2,000 documents, ``n_documents`` = D
  (Hoffman et al.'s online VB through the stepwise-EM path);
- scikit-learn ``LatentDirichletAllocation`` batch and online (``batch_size`` 2,000,
  ``learning_offset`` 10, ``learning_decay`` 0.7);
- gensim ``LdaModel`` batch (``update_every=0``) and online (``chunksize`` 2,000), when
  installed (its default float32 arithmetic).

Reported per library: seconds per pass (the fit's wall time over its passes) and the final
perplexity, every model scored by one scorer (scikit-learn's bound: its lambda and alpha put in
an ``LDADistribution``), and the speed ratio to mixfold batch. Goal: mixfold batch at least
scikit-learn batch's speed per pass at equal perplexity.

Then the model-parallel case: a K_big x V_big model (1,000 topics x 50,000 words: 400 MB of
lambda, 400 MB of the E-step's table) planned on two devices that each hold 55% of it; the
planner must cut its topics in two, each worker's planned parameter bytes half the whole. One
pass of ``ModelParallelEstimator`` over the synthetic documents (re-drawn over V_big) is timed
against the serial pass, and their statistics compared (the cut agrees to rounding). The two
workers are threads of one process: "per-worker memory" is what the planner places on each.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: set before NumPy starts its thread pools

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import sysconfig  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from scipy.sparse import csr_matrix  # noqa: E402

import mixfold  # noqa: E402
from mixfold import LDADistribution, LDAEstimator  # noqa: E402
from mixfold.examples.stdlib_topics import docstrings  # noqa: E402
from mixfold.parallel.model_decomposition import decompose_model  # noqa: E402
from mixfold.parallel.model_parallel import ModelParallelEstimator  # noqa: E402
from mixfold.parallel.resources import DeviceSpec, Resources  # noqa: E402

#: (synthetic documents, synthetic V, topics, stdlib source files (None: all), big K, big V,
#: documents in the model-parallel pass)
SIZES = {"full": (100_000, 5_000, 50, None, 1_000, 50_000, 2_000),
         "quick": (2_000, 500, 10, 60, 100, 5_000, 300)}
ITERATIONS, QUICK_ITERATIONS = 10, 3
BLOCK_DOCS = 2_000
_WORD = re.compile(r"[a-z]{3,}")


# --- corpora: documents as {word id: count} ---

def stdlib_corpus(max_files: int | None) -> tuple[list[dict[int, int]], list[str]]:
    """Docstrings of the standard library's modules, classes and functions."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts
                   and "test" not in p.parts and "tests" not in p.parts)[:max_files]
    texts = [Counter(_WORD.findall(doc.lower())) for doc in docstrings(files)]
    df = Counter(w for t in texts for w in t)
    vocab = sorted(w for w, n in df.items() if 5 <= n <= len(texts) // 2)
    index = {w: i for i, w in enumerate(vocab)}
    docs = [{index[w]: c for w, c in t.items() if w in index} for t in texts]
    return [d for d in docs if sum(d.values()) >= 5], vocab


def synthetic_corpus(n_docs: int, n_words: int, k: int, seed: int = 0) -> list[dict[int, int]]:
    rng = np.random.default_rng(seed)
    beta = rng.dirichlet(np.full(n_words, 0.05), size=k) + 1e-12
    truth = LDADistribution(beta * 1e9, 0.1, vocabulary=range(n_words), mean_length=80.0)
    return truth.sampler(seed + 1).sample(n_docs)


def as_matrix(docs: list[dict[int, int]], n_words: int) -> csr_matrix:
    rows = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
    cols = np.fromiter((w for d in docs for w in d), dtype=np.int64)
    vals = np.fromiter((c for d in docs for c in d.values()), dtype=np.float64)
    return csr_matrix((vals, (rows, cols)), shape=(len(docs), n_words))


def perplexity(topics: np.ndarray, k: int, docs: list[dict[int, int]]) -> float:
    """scikit-learn's perplexity of lambda ``topics`` with alpha = eta = 1/K."""
    return LDADistribution(topics, 1.0 / k, 1.0 / k, vocabulary=range(topics.shape[1])
                           ).perplexity(docs)


# --- the libraries: (seconds per pass, lambda) ---

def start_topics(k: int, n_words: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).gamma(100.0, 0.01, (k, n_words))


def run_mixfold_batch(docs, n_words, k, passes, seed):
    est = LDAEstimator(k, alpha=1.0 / k, vocabulary=range(n_words))
    start = LDADistribution(start_topics(k, n_words, seed), 1.0 / k, vocabulary=range(n_words))
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mixfold.fit(docs, est, init=start, max_iter=passes, tol=0.0, progress=False)
    return (time.perf_counter() - t) / passes, res.model.topics


def run_mixfold_online(docs, n_words, k, passes, seed):
    est = LDAEstimator(k, alpha=1.0 / k, vocabulary=range(n_words), n_documents=len(docs))
    online = mixfold.OnlineEM(est, init=LDADistribution(start_topics(k, n_words, seed), 1.0 / k,
                                                        vocabulary=range(n_words)),
                              step_exponent=0.7, step_offset=10.0)
    t = time.perf_counter()
    for _ in range(passes):
        for i in range(0, len(docs), BLOCK_DOCS):
            online.partial_fit(docs[i:i + BLOCK_DOCS])
    return (time.perf_counter() - t) / passes, online.model.topics


def run_sklearn(method):
    def run(docs, n_words, k, passes, seed):
        from sklearn.decomposition import LatentDirichletAllocation

        x = as_matrix(docs, n_words)
        lda = LatentDirichletAllocation(k, learning_method=method, max_iter=passes,
                                        batch_size=BLOCK_DOCS, learning_offset=10.0,
                                        doc_topic_prior=1.0 / k, topic_word_prior=1.0 / k,
                                        random_state=seed, n_jobs=1)
        t = time.perf_counter()
        lda.fit(x)
        return (time.perf_counter() - t) / passes, lda.components_
    return run


def run_gensim(batch):
    def run(docs, n_words, k, passes, seed):
        from gensim.models import LdaModel

        bow = [sorted(d.items()) for d in docs]
        t = time.perf_counter()
        lda = LdaModel(bow, num_topics=k, id2word={i: str(i) for i in range(n_words)},
                       passes=passes, chunksize=len(docs) if batch else BLOCK_DOCS,
                       update_every=0 if batch else 1, alpha="symmetric", eta=1.0 / k,
                       iterations=100, gamma_threshold=1e-3, random_state=seed,
                       eval_every=None)
        return (time.perf_counter() - t) / passes, lda.state.get_lambda().astype(np.float64)
    return run


LIBRARIES = {"mixfold batch": run_mixfold_batch, "mixfold online": run_mixfold_online,
             "sklearn batch": run_sklearn("batch"), "sklearn online": run_sklearn("online"),
             "gensim batch": run_gensim(True), "gensim online": run_gensim(False)}


def compare(name: str, docs, n_words: int, k: int, passes: int, seed: int = 0) -> list[dict]:
    rows = []
    for lib, run in LIBRARIES.items():
        try:
            seconds, topics = run(docs, n_words, k, passes, seed)
        except ImportError:
            rows.append({"corpus": name, "library": lib, "status": "not installed"})
            continue
        rows.append({"corpus": name, "library": lib, "seconds_per_pass": seconds,
                     "perplexity": perplexity(topics, k, docs)})
    base = rows[0]["seconds_per_pass"]
    for r in rows:
        if "seconds_per_pass" in r:
            r["time_vs_mixfold_batch"] = r["seconds_per_pass"] / base
    return rows


# --- the model-parallel case ---

def model_parallel_case(k: int, n_words: int, n_docs: int, seed: int = 0) -> dict:
    model = LDADistribution(start_topics(k, n_words, seed), 1.0 / k, vocabulary=range(n_words),
                            mean_length=80.0)
    whole = 16 * k * n_words
    devices = Resources(tuple(DeviceSpec(f"cpu:{i}", memory_bytes=int(0.55 * whole))
                              for i in range(2)))
    plan = decompose_model(model, devices, n_data=n_docs)
    per_worker = [16 * n_words * (c.stop - c.start) for c in plan.cuts]
    docs = synthetic_corpus(n_docs, n_words, 20, seed)
    est = LDAEstimator(k, alpha=1.0 / k, vocabulary=range(n_words))
    enc = est.encoder().encode(docs)
    serial = est.accumulator_factory().make()
    t = time.perf_counter()
    serial.seq_update(enc, np.ones(n_docs), model)
    t_serial = time.perf_counter() - t
    threaded = ModelParallelEstimator(est, plan).accumulator_factory().make()
    t = time.perf_counter()
    threaded.seq_update(enc, np.ones(n_docs), model)
    t_cut = time.perf_counter() - t
    a, b = serial.to_array(), threaded.to_array()
    return {"topics": k, "words": n_words, "model_bytes": whole, "axis": plan.axis.value,
            "cuts": [(c.start, c.stop) for c in plan.cuts], "per_worker_bytes": per_worker,
            "per_worker_share": [p / whole for p in per_worker], "docs": n_docs,
            "serial_pass_s": t_serial, "cut_pass_s": t_cut,
            "max_rel_diff": float(np.abs(a - b).max() / np.abs(a).max())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    parser.add_argument("--iterations", type=int, default=None, help="passes per fit")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--docs", type=int, default=None,
                        help="synthetic documents (default 100,000; 2,000 with --quick)")
    args = parser.parse_args(argv)
    n_docs, n_words, k, files, big_k, big_v, mp_docs = SIZES["quick" if args.quick else "full"]
    passes = args.iterations or (QUICK_ITERATIONS if args.quick else ITERATIONS)

    if args.docs:
        n_docs = args.docs
    docs, vocab = stdlib_corpus(files)
    print(f"P12  {len(docs)} stdlib docstrings over {len(vocab)} words; {n_docs} synthetic "
          f"documents over {n_words} words; K={k}; {passes} passes; one core", flush=True)
    print(f"{'corpus':10} {'library':15} {'s/pass':>9} {'perplexity':>11} {'time/mixfold':>12}",
          flush=True)
    rows = []
    for corpus, (d, v) in (("stdlib", (docs, len(vocab))),
                           ("synthetic", (synthetic_corpus(n_docs, n_words, k), n_words))):
        part = compare(corpus, d, v, k, passes)
        rows += part
        for r in part:  # printed as each corpus finishes: a long run shows what it has
            if "seconds_per_pass" not in r:
                print(f"{r['corpus']:10} {r['library']:15} {r['status']}", flush=True)
                continue
            print(f"{r['corpus']:10} {r['library']:15} {r['seconds_per_pass']:9.3f} "
                  f"{r['perplexity']:11.2f} {r['time_vs_mixfold_batch']:12.2f}", flush=True)
    mp = model_parallel_case(big_k, big_v, mp_docs)
    print(f"model parallel: {mp['topics']} topics x {mp['words']} words "
          f"({mp['model_bytes'] / 2**20:.0f} MiB) on 2 devices of 55%: {mp['axis']} cut "
          f"{mp['cuts']}, per-worker share {[round(s, 3) for s in mp['per_worker_share']]}; "
          f"one pass over {mp['docs']} docs {mp['serial_pass_s']:.2f} s serial, "
          f"{mp['cut_pass_s']:.2f} s cut; statistics agree to {mp['max_rel_diff']:.1e}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "model_parallel": mp}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
