"""LDA on a scipy.sparse CSR corpus: mixfold and scikit-learn fed the same matrix, side by side.

    python benchmarks/sparse_lda.py                          # the default, modest size
    python benchmarks/sparse_lda.py --docs 1000000 --words 100000 --density 0.001 --passes 1

The corpus is drawn from K known topics (Dirichlet(0.05) over V words, document proportions
Dirichlet(0.1)), about ``density * V`` words a document, built block by block straight into CSR
arrays and saved once (``scipy.sparse.save_npz``). Each library then runs in a child process of
its own (one core: BLAS and OpenMP limited to one thread), which loads the matrix and fits it:

- mixfold: ``fit(X, LDAEstimator(K, alpha=1/K))`` on the CSR matrix itself (read as CSR arrays,
  never densified), ``tol=0``, from scikit-learn's initial topics (the same seeded
  Gamma(100, 1/100) draw);
- scikit-learn: ``LatentDirichletAllocation(K, learning_method="batch", doc_topic_prior=1/K,
  topic_word_prior=1/K, n_jobs=1)`` for the same passes.

Reported per library: seconds per pass (wall and CPU: on a shared machine the CPU seconds are
the fairer figure), the peak resident memory of its process (VmHWM) and that
memory less the process's resident memory right after loading the matrix (what the fit added),
and the perplexity of its topics on the first 10,000 documents, both scored by one scorer
(mixfold's ``LDADistribution.perplexity`` with alpha = eta = 1/K, scikit-learn's bound).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core: set before NumPy starts its thread pools

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import scipy.sparse as sp  # noqa: E402

#: documents per generated block (its tokens: ~10^6 at 100 words a document)
BLOCK_DOCS = 10_000
#: documents the perplexity is computed over
SCORED_DOCS = 10_000
SEED = 5


def corpus(n_docs: int, n_words: int, density: float, k: int, seed: int = 0) -> sp.csr_matrix:
    """A document-term CSR matrix drawn from ``k`` topics, built block by block."""
    rng = np.random.default_rng(seed)
    topic_cdf = np.cumsum(rng.dirichlet(np.full(n_words, 0.05), size=k), axis=1)
    offsets, columns, counts = [np.zeros(1, dtype=np.int64)], [], []
    total = 0
    for lo in range(0, n_docs, BLOCK_DOCS):
        n = min(BLOCK_DOCS, n_docs - lo)
        lengths = rng.poisson(density * n_words, n)
        doc = np.repeat(np.arange(n), lengths)
        theta_cdf = np.cumsum(rng.dirichlet(np.full(k, 0.1), size=n), axis=1)
        topic = (rng.random(doc.size)[:, None] > theta_cdf[doc]).sum(axis=1)
        word = np.empty(doc.size, dtype=np.int64)
        for t in range(k):
            at = topic == t
            word[at] = np.searchsorted(topic_cdf[t], rng.random(at.sum()) * topic_cdf[t, -1])
        block = sp.csr_matrix((np.ones(doc.size), (doc, np.minimum(word, n_words - 1))),
                              shape=(n, n_words))
        block.sum_duplicates()
        offsets.append(block.indptr[1:].astype(np.int64) + total)
        total += block.nnz
        columns.append(block.indices)
        counts.append(block.data)
    return sp.csr_matrix((np.concatenate(counts), np.concatenate(columns),
                          np.concatenate(offsets)), shape=(n_docs, n_words))


def start_topics(k: int, n_words: int) -> np.ndarray:
    return np.random.RandomState(SEED).gamma(100.0, 0.01, (k, n_words))


def _rss_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def fit_mixfold(x: sp.csr_matrix, k: int, passes: int) -> np.ndarray:
    import mixfold
    from mixfold import LDADistribution, LDAEstimator

    start = LDADistribution(start_topics(k, x.shape[1]), 1.0 / k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = mixfold.fit(x, LDAEstimator(k, alpha=1.0 / k), init=start, max_iter=passes,
                          tol=0.0, progress=False)
    return res.model.topics


def fit_sklearn(x: sp.csr_matrix, k: int, passes: int) -> np.ndarray:
    from sklearn.decomposition import LatentDirichletAllocation

    lda = LatentDirichletAllocation(k, learning_method="batch", max_iter=passes,
                                    doc_topic_prior=1.0 / k, topic_word_prior=1.0 / k,
                                    random_state=SEED, n_jobs=1, evaluate_every=-1)
    return lda.fit(x).components_


FITTERS = {"mixfold": fit_mixfold, "scikit-learn": fit_sklearn}


def child(library: str, path: str, k: int, passes: int) -> dict:
    """Load the matrix, fit it, report (run in a process of its own)."""
    from mixfold import LDADistribution

    x = sp.load_npz(path).tocsr()
    loaded = _rss_mb("VmRSS:")
    t, cpu = time.perf_counter(), time.process_time()
    topics = FITTERS[library](x, k, passes)
    seconds = (time.perf_counter() - t) / passes
    cpu_seconds = (time.process_time() - cpu) / passes
    peak = _rss_mb("VmHWM:")
    scored = LDADistribution(topics, 1.0 / k, 1.0 / k).perplexity(x[:SCORED_DOCS])
    return {"library": library, "s_per_pass": seconds, "cpu_s_per_pass": cpu_seconds,
            "peak_rss_mb": peak,
            "fit_added_mb": peak - loaded, "perplexity": scored}


def run(docs: int, words: int, density: float, k: int, passes: int) -> list[dict]:
    t = time.perf_counter()
    x = corpus(docs, words, density, k)
    made = time.perf_counter() - t
    matrix_mb = (x.data.nbytes + x.indices.nbytes + x.indptr.nbytes) / 2**20
    print(f"corpus: {docs:,} documents x {words:,} words, {x.nnz:,} nonzeros (density "
          f"{x.nnz / (docs * words):.4%}), CSR {matrix_mb:,.0f} MiB, drawn in {made:.1f} s",
          flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "corpus.npz")
        sp.save_npz(path, x, compressed=False)
        del x
        for library in FITTERS:
            out = subprocess.run([sys.executable, __file__, "--child", library, "--path", path,
                                  "--topics", str(k), "--passes", str(passes)],
                                 check=True, capture_output=True, text=True)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)  # each library's figures as they come
    return rows


def table(rows: list[dict]) -> str:
    base = next(r for r in rows if r["library"] == "mixfold")
    lines = ["| library | s/pass | CPU s/pass | peak RSS MiB | added by the fit MiB | "
             "perplexity | time / mixfold | peak RSS / mixfold |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['library']} | {r['s_per_pass']:.2f} | {r['cpu_s_per_pass']:.2f} | "
                     f"{r['peak_rss_mb']:,.0f} | "
                     f"{r['fit_added_mb']:,.0f} | {r['perplexity']:.1f} | "
                     f"{r['s_per_pass'] / base['s_per_pass']:.2f} | "
                     f"{r['peak_rss_mb'] / base['peak_rss_mb']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=50_000)
    p.add_argument("--words", type=int, default=10_000)
    p.add_argument("--density", type=float, default=0.005)
    p.add_argument("--topics", type=int, default=10)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--child", choices=sorted(FITTERS), help=argparse.SUPPRESS)
    p.add_argument("--path", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(child(a.child, a.path, a.topics, a.passes)))
        return 0
    rows = run(a.docs, a.words, a.density, a.topics, a.passes)
    print(f"K={a.topics}, {a.passes} passes, one core each, perplexity on the first "
          f"{SCORED_DOCS:,} documents")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
