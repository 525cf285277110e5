"""Linear terms made from an explicit feature matrix, and the brute-force float64 E-step they
stand for: the reference the fused engines' tests compare with."""

from __future__ import annotations

import numpy as np
from scipy.special import logsumexp

from mixfold.compute.linear import LinearTerms
from mixfold.compute.screened import round_to_band


class MatrixTerms:
    """:class:`LinearTerms` of ``log p_k(x_i) = coef[k] . phi[i] + const[k] (+ table[k, codes[i]])
    (+ base[i])``, recording the sums the fold hands back."""

    def __init__(self, phi: np.ndarray, coef: np.ndarray, const: np.ndarray,
                 table: np.ndarray | None = None, codes: np.ndarray | None = None,
                 base: np.ndarray | None = None, peak: np.ndarray | None = None) -> None:
        self.phi, self.coef, self.const = phi, coef, const
        self.table, self.codes, self.base = table, codes, base
        k, f = coef.shape
        self.sums, self.mass = np.zeros((k, f)), np.zeros(k)
        self.counts = None if table is None else np.zeros(table.shape)

        def features(lo: int, hi: int, out: np.ndarray) -> None:
            out[...] = phi[lo:hi].reshape(out.shape[0], -1, f).transpose(0, 2, 1)

        def add_sums(sums: np.ndarray, mass: np.ndarray, counts: np.ndarray | None) -> None:
            self.sums += sums
            self.mass += mass
            if counts is not None:
                self.counts += counts

        self.terms = LinearTerms(coef, const, features if f else None, add_sums, codes=codes,
                                 table=table, base=base, peak=peak)


def brute_estep(parts: list[MatrixTerms], log_weights: np.ndarray, weights: np.ndarray
                ) -> dict[str, np.ndarray]:
    """The float64 E-step of ``parts`` side by side: per-row log-densities, weighted
    posteriors (n, K), each part's feature sums, mass and table counts."""
    scores = np.zeros((len(weights), len(log_weights))) + log_weights
    base = np.zeros(len(weights))
    for p in parts:
        scores += p.phi @ p.coef.T + p.const
        if p.table is not None:
            scores += p.table[:, p.codes].T
        if p.base is not None:
            base += p.base
    lse = logsumexp(scores, axis=1)
    with np.errstate(invalid="ignore"):
        post = np.where(np.isfinite(lse)[:, None], np.exp(scores - lse[:, None]), 0.0)
    r = post * weights[:, None]
    out = {"lse": lse + base, "resp": r, "mass": r.sum(axis=0)}
    for i, p in enumerate(parts):
        out[f"sums{i}"] = r.T @ p.phi
        if p.table is not None:
            out[f"counts{i}"] = np.stack([np.bincount(p.codes, weights=r[:, k],
                                                      minlength=p.table.shape[1])
                                          for k in range(r.shape[1])])
    return out


def screened_problem(m: int, k: int = 4, f: int = 3, levels: int | None = 5, far: float = 1.0,
                     dead: bool = False, seed: int = 0) -> tuple[MatrixTerms, np.ndarray]:
    """Gaussian-like scores in ``f`` features (rows ``far`` times farther out than the
    components' spread) and a table of ``levels``; ``dead``: a level no component allows."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 4.0, (k, f))
    x = centres[rng.integers(0, k, m)] + rng.normal(0.0, 1.0, (m, f)) * far
    phi = np.concatenate([x * x, x], axis=1).astype(np.float32).astype(np.float64)
    var = rng.uniform(0.5, 2.0, (k, f))
    coef = np.concatenate([-0.5 / var, centres / var], axis=1)
    const = -0.5 * (centres ** 2 / var + np.log(2 * np.pi * var)).sum(axis=1)
    table = codes = None
    if levels:
        table = np.log(rng.dirichlet(np.ones(levels), k))
        table[1, 0] = -np.inf
        if dead:
            table[:, levels - 1] = -np.inf
        codes = rng.integers(0, levels, m)
    terms = MatrixTerms(phi, coef, const, table=table, codes=codes)
    return terms, np.log(rng.dirichlet(np.ones(k) * 5))


def band_block(screen, part: MatrixTerms, band: str, round_features: bool = False,
               pad: int = 0) -> tuple[np.ndarray, ...]:
    """A block as the screened engine hands it to the rescoring: band scores (K, m + pad)
    float32 (NumPy's GEMM of the band's coefficients and the exact float32 features, or both
    rounded, as the tiles take them), exact features z (m, F1) float32, joined codes (T, m)."""
    m = len(part.phi)
    z = np.concatenate([part.phi, np.ones((m, 1))], axis=1).astype(np.float32)
    zs = round_to_band(z, band) if round_features else z
    scores = np.zeros((screen.coef.shape[0], m + pad), np.float32)
    scores[:, :m] = round_to_band(screen.coef, band) @ zs.T
    codes = screen.codes([part.codes] if part.table is not None else [], 0, m)
    tables = round_to_band(screen.tables, band)
    for c in codes:
        scores[:, :m] += tables[:, c]
    return scores, z, codes
