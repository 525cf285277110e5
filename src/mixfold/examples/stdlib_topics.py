"""Topics of the Python standard library's documentation: latent Dirichlet allocation.

The corpus is real text that is on every machine with Python: the docstrings of the standard
library's modules, classes and functions, read from the source files with ``ast`` (nothing is
imported). Each docstring is a bag of its lower-case words of three or more letters, minus the
commonest words and the rarest; an LDA model of a few topics is fitted by variational EM and
each topic is shown by its most probable words.

    python -m mixfold.examples.stdlib_topics [--topics 6] [--modules 120]
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import sysconfig
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

import mixfold
from mixfold import LDAEstimator

__all__ = ["stdlib_documents", "docstrings", "fit_topics", "main"]

_WORD = re.compile(r"[a-z]{3,}")
#: Words too common in docstrings to tell topics apart (beyond the frequency cut).
STOP_WORDS = frozenset(
    "the and for are this that with from not none return returns returned true false which "
    "will can when all any its into than then there these one use used using also may must "
    "such only each other new see default given object value values should instead".split())


def docstrings(paths: Iterable[Path]) -> Iterator[str]:
    """The docstrings of the modules, classes and functions of the Python files ``paths``, read
    with ``ast`` (nothing is imported; a file Python cannot parse is skipped)."""
    for path in paths:
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                 ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    yield doc


def stdlib_documents(max_modules: int = 120, min_words: int = 8) -> list[list[str]]:
    """Docstrings of the first ``max_modules`` top-level standard-library modules (sorted by
    name) as token lists, each word kept if it occurs in 5 or more documents and at most a
    tenth of them."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts = [[w for w in _WORD.findall(doc.lower()) if w not in STOP_WORDS]
             for doc in docstrings(sorted(root.glob("*.py"))[:max_modules])]
    df = Counter(w for t in texts for w in set(t))
    keep = {w for w, n in df.items() if 5 <= n <= len(texts) // 10}
    docs = [[w for w in t if w in keep] for t in texts]
    return [d for d in docs if len(d) >= min_words]


def fit_topics(docs: list[list[str]], topics: int = 6, seed: int = 0,
               max_iter: int = 30) -> mixfold.LDADistribution:
    """Batch variational EM for ``max_iter`` passes (alpha = 1 / topics)."""
    return mixfold.optimize(docs, LDAEstimator(topics, alpha=1.0 / topics), seed=seed,
                            max_iter=max_iter, tol=1e-5, progress=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=6)
    parser.add_argument("--modules", type=int, default=120)
    args = parser.parse_args(argv)
    docs = stdlib_documents(args.modules)
    model = fit_topics(docs, args.topics)
    print(f"{len(docs)} docstrings, {len(model.vocabulary)} words; "
          f"{model.fit_result.iterations} passes; perplexity {model.perplexity(docs):.0f}")
    for t, words in enumerate(model.top_words(8)):
        print(f"  topic {t}: " + " ".join(w for w, _ in words))
    return 0


if __name__ == "__main__":
    sys.exit(main())
