"""
Topics of the Python standard library's docstrings
==================================================

Latent Dirichlet allocation on real text that every Python installation carries: the
docstrings of the standard library's modules, classes and functions (read from the source with
``ast``; nothing is imported). Each docstring is a bag of words; batch variational EM fits six
topics, and each topic is drawn as its most probable words.

The corpus reader and the fit are :mod:`mixfold.examples.stdlib_topics`.
"""

# %%
# The corpus and the fit
# ----------------------
import matplotlib.pyplot as plt

from mixfold.examples.stdlib_topics import fit_topics, stdlib_documents

docs = stdlib_documents(max_modules=120)
model = fit_topics(docs, topics=6)
print(f"{len(docs)} documents, {len(model.vocabulary)} words, "
      f"{model.fit_result.iterations} passes, perplexity {model.perplexity(docs):.0f}")

# %%
# Each topic's eight most probable words
# --------------------------------------
fig, axes = plt.subplots(2, 3, figsize=(11, 5.5))
for t, (ax, words) in enumerate(zip(axes.flat, model.top_words(8))):
    names = [w for w, _ in words][::-1]
    ax.barh(names, [p for _, p in words][::-1], color=f"C{t}")
    ax.set_title(f"topic {t}")
    ax.tick_params(axis="x", labelsize="small")
fig.suptitle("LDA topics of the standard library's docstrings (word probabilities)")
fig.tight_layout()
plt.show()
