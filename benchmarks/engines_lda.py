"""LDA on Spark: mixfold's variational EM against MLlib's LDA (``em`` and ``online``), same run.

    python benchmarks/engines_lda.py                  # 20,000 documents, vocabulary 2,000, K=10
    python benchmarks/engines_lda.py --docs 100000 --vocabulary 5000
    python benchmarks/engines_lda.py --quick          # 2,000 documents, vocabulary 500

The corpus is sampled from an LDA (K topics drawn from Dirichlet(0.05) over the vocabulary,
each document's topic weights from Dirichlet(0.5), its length Poisson(100)); 90% of the
documents are written to Parquet as a column of Spark ML sparse vectors, fitted on
``local[2,4]``, and the last 10% are held out. For each fit: the time to make the DataFrame
ready (mixfold: encoding it on the executors, the first encode starting the Python workers;
MLlib: caching its vector column), seconds per iteration (MLlib's: its fit at ``maxIter=I+1``
less its fit at ``maxIter=1``, over ``I``; mixfold's: the median of I iterations over the open
handle), and the held-out perplexity ``exp(-bound / tokens)`` with one evaluator for all three:
mixfold's per-document variational bound under each fit's topics (MLlib online: its
``topicsMatrix``, the variational lambda; MLlib em: its expected topic-word counts plus its
``topicConcentration - 1``, the MAP estimate's pseudo-counts) at the same alpha. MLlib's own
``logPerplexity`` of its models is shown beside. MLlib online runs with ``subsamplingRate=1``
(every document every iteration, as a batch iteration of mixfold). Ratios are to mixfold.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from mixfold import LDADistribution, LDAEstimator
from mixfold.backends.local import LocalEncodedData
from mixfold.backends.spark import SparkEncodedData, local_spark_session, stop_spark_session

from _table import print_measures  # benchmarks/: the script's own folder is on the path
from backends import iteration_times

K = 10
ALPHA = 0.5  # the sampler's and every fit's document-topic prior
PARTITIONS = 8
EM_ETA = 1.1  # MLlib em's default topic concentration


def corpus(docs: int, vocabulary: int, seed: int = 0) -> sp.csr_matrix:
    """``docs`` documents of counts over ``vocabulary`` words, sampled from an LDA."""
    rng = np.random.default_rng(seed)
    topics = rng.dirichlet(np.full(vocabulary, 0.05), size=K)
    theta = rng.dirichlet(np.full(K, ALPHA), size=docs)
    lengths = np.maximum(rng.poisson(100, size=docs), 1)
    rows = [rng.multinomial(n, p) for n, p in zip(lengths, theta @ topics)]  # the same draws
    columns = [np.flatnonzero(r) for r in rows]  # sparse as drawn: never (docs, V) counts twice
    offsets = np.concatenate([[0], np.cumsum([c.size for c in columns])])
    return sp.csr_matrix((np.concatenate([r[c] for r, c in zip(rows, columns)]).astype(np.float64),
                          np.concatenate(columns), offsets), shape=(docs, vocabulary))


def write_parquet(session, x: sp.csr_matrix, path: str) -> None:
    from pyspark.ml.linalg import SparseVector

    rows = [(SparseVector(x.shape[1], x.indices[a:b].tolist(), x.data[a:b].tolist()),)
            for a, b in zip(x.indptr[:-1], x.indptr[1:])]
    session.createDataFrame(rows, ["counts"]).repartition(PARTITIONS).write.parquet(path)


def held_out_perplexity(topics: np.ndarray, alpha: float, held_out: sp.csr_matrix) -> float:
    """``exp(-bound / tokens)`` of the held-out documents under ``topics`` (K x V Dirichlet
    parameters), the bound mixfold's LDA computes per document."""
    model = LDADistribution(topics, alpha, doc_iterations=200, doc_tol=1e-6)
    with LocalEncodedData(model.encoder().encode(held_out)) as handle:
        _, bound = handle.log_density_sum(model)
    return float(np.exp(-bound / held_out.sum()))


def timed(fn):
    t = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t


def mixfold_fit(df, iterations: int) -> dict:
    estimator = LDAEstimator(K, alpha=ALPHA)
    (handle, bound), cold = timed(lambda: SparkEncodedData.from_dataframe(df, estimator))
    handle.close()  # the first encode starts the Python workers; the second finds them
    (handle, bound), encode = timed(lambda: SparkEncodedData.from_dataframe(df, estimator))
    try:
        times, model = iteration_times(handle, bound, iterations)
    finally:
        handle.close()
    return {"cold": cold, "ready": encode, "iteration": statistics.median(times),
            "topics": model.topics, "own": None}


def mllib_fit(df, optimizer: str, iterations: int) -> dict:
    from pyspark.ml.clustering import LDA

    options = dict(k=K, seed=0, optimizer=optimizer, featuresCol="counts")
    if optimizer == "online":
        options.update(docConcentration=[ALPHA], topicConcentration=1.0 / K,
                       subsamplingRate=1.0, optimizeDocConcentration=False)
    else:  # MLlib's em defaults (its priors must exceed 1), stated to be read back
        options.update(topicConcentration=EM_ETA)
    vectors, ready = timed(lambda: df.select("counts").cache())
    _, count_s = timed(vectors.count)
    LDA(maxIter=1, **options).fit(vectors)  # warm, not timed
    _, one = timed(lambda: LDA(maxIter=1, **options).fit(vectors))
    fitted, many = timed(lambda: LDA(maxIter=iterations + 1, **options).fit(vectors))
    lam = fitted.topicsMatrix().toArray().T  # K x V
    if optimizer == "em":  # expected counts: the MAP estimate's pseudo-counts add eta - 1
        lam = lam + EM_ETA - 1.0
    vectors.unpersist()
    return {"ready": ready + count_s, "iteration": (many - one) / iterations,
            "topics": np.maximum(lam, 1e-12), "own": fitted}


def table(docs: int, vocabulary: int, iterations: int, folder: Path) -> list[tuple]:
    x = corpus(docs, vocabulary)
    cut = int(docs * 0.9)
    train, held_out = x[:cut], x[cut:]
    session = local_spark_session(2)
    try:
        path = str(folder / "train.parquet")
        write_parquet(session, train, path)
        held_path = str(folder / "held_out.parquet")
        write_parquet(session, held_out, held_path)
        df = session.read.parquet(path)
        _, read_s = timed(df.count)
        fits = {"mixfold": mixfold_fit(df, iterations)}
        for optimizer in ("em", "online"):
            fits[f"MLlib {optimizer}"] = mllib_fit(df, optimizer, iterations)
        held_df = session.read.parquet(held_path)
        own = {name: f["own"].logPerplexity(held_df) for name, f in fits.items() if f["own"]}
    finally:
        stop_spark_session(session)
    base = fits["mixfold"]
    out = [("Parquet", "read (count)", read_s, None),
           ("mixfold", "encode, first (Python workers start)", base["cold"], None)]
    for f in fits.values():
        f["perplexity"] = held_out_perplexity(f["topics"], ALPHA, held_out)
    for name, f in fits.items():
        first = name == "mixfold"
        out.append((name, "ready to fit (encode / cache) s", f["ready"],
                    None if first else f["ready"] / base["ready"]))
        out.append((name, "s/iteration", f["iteration"],
                    None if first else f["iteration"] / base["iteration"]))
        out.append((name, "held-out perplexity (one evaluator)", f["perplexity"],
                    None if first else f["perplexity"] / base["perplexity"]))
        if name in own:
            out.append((name, "held-out perplexity (MLlib's logPerplexity)",
                        float(np.exp(own[name])), None))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--vocabulary", type=int, default=2_000)
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="2,000 documents, vocabulary 500, 2 iterations")
    args = parser.parse_args()
    docs, vocabulary, iterations = (2_000, 500, 2) if args.quick else \
        (args.docs, args.vocabulary, args.iterations)
    print(f"{docs:,} documents (90% fitted, 10% held out), vocabulary {vocabulary:,}, K={K}, "
          f"{iterations} iterations, local[2,4]; load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        rows = table(docs, vocabulary, iterations, Path(folder))
    print_measures(rows, "fit", "ratio to mixfold")


if __name__ == "__main__":
    main()
