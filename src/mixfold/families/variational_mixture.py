"""Variational Bayesian mixtures of any component family: a Dirichlet-process (stick-breaking)
or Dirichlet prior on the weights, conjugate posteriors for the leaves that have them
(:mod:`mixfold.families.conjugate`), point estimates for the rest.

The fold is EM's: the E-step scores every row under ``E_q[log w_k] + E_q[log p_k(x)]``, which
is a plain mixture whose components are each leaf's *point* (its family at the expected
natural parameters) and whose log-weights carry ``E_q[log w_k]`` plus the leaves' offsets; the
statistics are the family's own. Only the M-step differs: posteriors instead of maximum
likelihood. The fit loop reports the evidence lower bound ``sum_n log sum_k exp(...) -
KL(q || prior)`` (:class:`~mixfold.capabilities.VariationalBound`) and checks that it rises.

The leaves are found through the record, composite and optional nodes of a component; any
other node (a Weibull field, a nested hidden Markov model) keeps its own M-step, a point
estimate that contributes no KL term.

>>> import numpy as np, mixfold
>>> from mixfold import GaussianEstimator
>>> rng = np.random.default_rng(0)
>>> x = np.concatenate([rng.normal(-4, 1, 300), rng.normal(4, 1, 700)])
>>> est = VariationalMixtureEstimator([GaussianEstimator()] * 6, weight_concentration=0.01)
>>> model = mixfold.optimize(x, est, tol=1e-8, max_iter=500, progress=False)
>>> used = model.weights > 0.01
>>> int(used.sum()), sorted(round(c.mu) for c, u in zip(model.components, used) if u)
(2, [-4, 4])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from mixfold.capabilities import VariationalBound
from mixfold.errors import ParameterError
from mixfold.families._scipy import digamma
from mixfold.families._protocol import Distribution, Encoder, Estimator, InitRandom, family
from mixfold.families.composite import (CompositeDistribution, CompositeEstimator,
                                        RecordDistribution, RecordEstimator)
from mixfold.families.conjugate import (BetaPrior, conjugate_updates, kl_beta,
                                        kl_dirichlet, prior_key)
from mixfold.families.mixture import MixtureDistribution, MixtureEstimator
from mixfold.families.optional import OptionalDistribution, OptionalEstimator
from mixfold.options import none_or, number, one_of, rule

__all__ = ["VariationalMixtureDistribution", "VariationalMixtureEstimator", "WEIGHT_PRIORS",
           "weight_posterior"]

WEIGHT_PRIORS = ("dirichlet_process", "dirichlet")


# ---------------------------------------------------------------------------------------------
# The weights


class WeightPosterior(NamedTuple):
    """``E_q[log w]`` (K,), ``E_q[w]`` (K,, normalised), ``KL(q || prior)`` and the posterior's
    parameters (the Dirichlet's concentration, or the sticks' Beta ``[a, b]``)."""

    expected_log: np.ndarray
    mean: np.ndarray
    kl: float
    concentration: list[Any]


def weight_posterior(counts: np.ndarray, prior: str, alpha0: float) -> WeightPosterior:
    """The weights' posterior from the posterior mass of each component (scikit-learn's
    truncated stick-breaking: K sticks ``Beta(1 + N_k, alpha0 + N_{>k})``).

    >>> wp = weight_posterior(np.array([3.0, 1.0]), "dirichlet", 1.0)
    >>> wp.mean.tolist(), wp.concentration
    ([0.6666666666666666, 0.3333333333333333], [4.0, 2.0])
    """
    if prior == "dirichlet":
        alpha = alpha0 + counts
        return WeightPosterior(digamma(alpha) - digamma(alpha.sum()), alpha / alpha.sum(),
                               kl_dirichlet(alpha, np.full(len(alpha), alpha0)), alpha.tolist())
    a = 1.0 + counts
    b = alpha0 + np.concatenate([np.cumsum(counts[::-1])[-2::-1], [0.0]])
    e_stick, e_rest = digamma(a) - digamma(a + b), digamma(b) - digamma(a + b)
    expected_log = e_stick + np.concatenate([[0.0], np.cumsum(e_rest)[:-1]])
    mean = a / (a + b) * np.concatenate([[1.0], np.cumprod(b / (a + b))[:-1]])
    return WeightPosterior(expected_log, mean / mean.sum(), float(kl_beta(a, b, 1.0, alpha0).sum()),
                           [a.tolist(), b.tolist()])


# ---------------------------------------------------------------------------------------------
# Distribution


@family("VariationalMixture")
class VariationalMixtureDistribution(MixtureDistribution, VariationalBound):
    """A variational mixture: the components' points, ``weights`` = ``E_q[w]``, and
    ``log_weights`` = ``E_q[log w_k]`` plus component ``k``'s offsets (what the E-step adds to
    each point's log-density). ``weight_concentration`` is the weights' posterior (a list for
    the Dirichlet, ``[a, b]`` of the sticks for the Dirichlet process), ``posteriors[k]`` the
    hyperparameters of component ``k``'s conjugate leaves, ``kl`` the model's
    ``KL(q || prior)``.

    Its log-density is ``log sum_k exp(log_weights_k + log point_k(x))``, the expected
    log-joint (scikit-learn's ``score_samples`` of a ``BayesianGaussianMixture``); it samples
    from the points with weights ``E_q[w]``.
    """

    def __init__(self, components: Sequence[Distribution], weights: Sequence[float],
                 log_weights: Sequence[float], *, weight_prior: str = "dirichlet_process",
                 prior_concentration: float = 1.0, weight_concentration: Sequence[Any] = (),
                 posteriors: Sequence[Sequence[dict[str, Any]]] = (), kl: float = 0.0):
        super().__init__(components, weights)
        lw = np.asarray(log_weights, dtype=np.float64)
        if lw.shape != self.weights.shape or np.isnan(lw).any():
            raise ParameterError(f"need one log-weight per component, got {lw.tolist()}")
        self.log_weights = lw
        self.weight_prior = weight_prior
        self.prior_concentration = float(prior_concentration)
        self.weight_concentration = [np.asarray(c, dtype=np.float64)
                                     for c in weight_concentration] \
            if weight_prior == "dirichlet_process" else \
            np.asarray(weight_concentration, dtype=np.float64)
        self.posteriors = [list(p) for p in posteriors]
        self.kl = float(kl)

    def kl_to_prior(self) -> float:
        return self.kl

    def band_scores(self, enc: Any, ops: Any) -> list[Any]:
        """``log_weights_k + log point_k(x)`` in the band of ``ops``, one array per component."""
        return [ops.add(comp.band_log_density(self.units.rows(enc, k), ops),
                        ops.array(lw))
                for k, (comp, lw) in enumerate(zip(self.components, self.log_weights))]

    def point_estimate(self) -> MixtureDistribution:
        """The plain mixture of the points with weights ``E_q[w]``."""
        return MixtureDistribution(self.components, self.weights)

    def estimator(self, **options: Any) -> VariationalMixtureEstimator:
        options.setdefault("weight_prior", self.weight_prior)
        options.setdefault("weight_concentration", self.prior_concentration)
        return VariationalMixtureEstimator([c.estimator() for c in self.components], **options)

    def _params(self) -> dict[str, Any]:
        wc = self.weight_concentration
        return {**super()._params(), "log_weights": self.log_weights.tolist(),
                "weight_prior": self.weight_prior,
                "prior_concentration": self.prior_concentration,
                "weight_concentration": [c.tolist() for c in wc] if isinstance(wc, list)
                else wc.tolist(),
                "posteriors": self.posteriors, "kl": self.kl}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> VariationalMixtureDistribution:
        return cls([Distribution.from_dict(c) for c in p["components"]], p["weights"],
                   p["log_weights"], weight_prior=p["weight_prior"],
                   prior_concentration=p["prior_concentration"],
                   weight_concentration=p["weight_concentration"],
                   posteriors=p["posteriors"], kl=p["kl"])


# ---------------------------------------------------------------------------------------------
# The components' posteriors: one walk over an estimator tree, all components at once


class _Node(NamedTuple):
    """One component's posterior of one node: its point, offset, KL and leaf posteriors."""

    point: Distribution
    offset: float
    kl: float
    posteriors: list[dict[str, Any]]


def _posteriors(est: Estimator, nobs: Sequence[float], stats: Sequence[Any],
                priors: Mapping[str, Any], path: str) -> list[_Node]:
    """The node ``est``'s posterior in each component, from each component's statistics."""
    if isinstance(est, (CompositeEstimator, RecordEstimator)):
        names = list(est.fields) if isinstance(est, RecordEstimator) else \
            [str(i) for i in range(len(est.factors))]
        kids = [_posteriors(f, nobs, [s[1][i] for s in stats], priors, f"{path}{name}/")
                for i, (f, name) in enumerate(zip(est.factors, names))]
        out = []
        for k in range(len(stats)):
            parts = [kid[k] for kid in kids]
            points = [p.point for p in parts]
            point = RecordDistribution(dict(zip(est.fields, points))) \
                if isinstance(est, RecordEstimator) else CompositeDistribution(points)
            out.append(_Node(point, sum(p.offset for p in parts), sum(p.kl for p in parts),
                             [q for p in parts for q in p.posteriors]))
        return out
    if isinstance(est, OptionalEstimator):
        return _optional(est, stats, priors, path)
    key = prior_key(est)
    if key is None:  # no conjugate update here: the node's own M-step
        return [_Node(est.estimate(n, s), 0.0, 0.0, []) for n, s in zip(nobs, stats)]
    updates = conjugate_updates(est, [s[0] for s in stats], priors.get(key))
    return [_Node(u.point, u.offset, u.kl, [{"node": path.rstrip("/"), "family": key,
                                             **u.posterior}])
            for u in updates]


def _optional(est: OptionalEstimator, stats: Sequence[Any], priors: Mapping[str, Any],
              path: str) -> list[_Node]:
    """A value that may be missing: a Beta posterior on being missing; the inner node's
    offset applies to the rows that have the value, so it moves into ``p_missing``."""
    counts = [s[0][0] for s in stats]
    inner = _posteriors(est.inner, [float(c[1]) for c in counts], [s[1][0] for s in stats],
                        priors, f"{path}inner/")
    prior = priors.get("Optional", BetaPrior())
    out = []
    for (missing, present), node in zip(counts, inner):
        a, b = prior.a + missing, prior.b + present
        # the present rows' score ψ(b) - ψ(a+b) + inner offset against the missing ones'
        e_missing = float(digamma(a) - digamma(a + b))
        e_present = float(digamma(b) - digamma(a + b)) + node.offset
        total = float(np.logaddexp(e_missing, e_present))
        out.append(_Node(OptionalDistribution(node.point, float(np.exp(e_missing - total)),
                                              missing=est.missing),
                         total, node.kl + float(kl_beta(a, b, prior.a, prior.b)),
                         node.posteriors + [{"node": f"{path}missing", "family": "Optional",
                                             "a": a, "b": b}]))
    return out


# ---------------------------------------------------------------------------------------------
# Estimator


class VariationalMixtureEstimator(MixtureEstimator):
    """Variational Bayesian mixture of ``components`` (one estimator per component, of any
    family tree), fitted by the same fold as :class:`~mixfold.MixtureEstimator`.

    ``weight_prior="dirichlet_process"`` (stick-breaking, truncated at the K components) or
    ``"dirichlet"`` (symmetric), of concentration ``weight_concentration`` (``None``: 1 / K, as
    scikit-learn). Components the data does not need keep ``E_q[w]`` near zero: the fit
    chooses the number of components it uses. ``priors`` maps a family name
    (``"MultivariateGaussian"``, ``"Categorical"``, ``"Optional"``, ...) to its prior
    (:mod:`mixfold.families.conjugate`); a family left out gets its default. A Gaussian leaf's
    ``reg_covar`` is added to its scatter per unit mass, as scikit-learn does.

    ``FitResult.lower_bound`` holds the evidence lower bound of every iteration.
    """

    option_rules = {**MixtureEstimator.option_rules, "weight_prior": one_of(*WEIGHT_PRIORS),
                    "weight_concentration": none_or(number(0, above=True)),
                    "priors": none_or(rule(lambda v: isinstance(v, Mapping) and all(
                        isinstance(k, str) for k in v), "a mapping of family names to priors"))}

    def __init__(self, components: Sequence[Estimator],
                 weight_prior: str = "dirichlet_process",
                 weight_concentration: float | None = None,
                 priors: Mapping[str, Any] | None = None):
        super().__init__(components)
        self.check_options(weight_prior=weight_prior, weight_concentration=weight_concentration,
                           priors=priors)
        self.weight_prior = weight_prior
        self.weight_concentration = weight_concentration
        self.priors = dict(priors or {})

    @property
    def concentration(self) -> float:
        """The weights' prior concentration in use (1 / K when not given)."""
        return 1.0 / self.num_components if self.weight_concentration is None \
            else float(self.weight_concentration)

    def bind(self, encoder: Encoder) -> VariationalMixtureEstimator:
        return type(self)(MixtureEstimator.bind(self, encoder).components, self.weight_prior,
                          self.weight_concentration, self.priors)

    def from_responsibilities(self, rows: Any, resp: Any) -> VariationalMixtureDistribution:
        """The posterior the M-step makes from given responsibilities ``resp``, array of shape
        (n_rows, K), of ``rows`` (a start: scikit-learn's is k-means labels, one-hot)."""
        encoder = self.encoder().fit(rows)
        bound, enc = self.bind(encoder), encoder.encode(rows)
        resp = np.asarray(resp, dtype=np.float64)
        if resp.shape != (enc.n_rows, self.num_components):
            expected = (enc.n_rows, self.num_components)
            raise ParameterError(f"responsibilities must have shape {expected}, got {resp.shape}")
        acc = bound.accumulator_factory().make()
        acc.counts += resp.sum(axis=0)
        acc.units.initialize(enc, resp, InitRandom(0))
        return bound.estimate(float(resp.sum()), acc.value())

    def estimate(self, nobs: float, stats: Any) -> VariationalMixtureDistribution:
        (counts,), comp_stats = stats
        weights = weight_posterior(counts, self.weight_prior, self.concentration)
        nodes: list[_Node | None] = [None] * self.num_components
        # components of one structure share their empirical priors (the pooled statistics)
        groups: dict[str, list[int]] = {}
        for k, est in enumerate(self.components):
            groups.setdefault(repr(est), []).append(k)
        for members in groups.values():
            found = _posteriors(self.components[members[0]], [float(counts[k]) for k in members],
                                [comp_stats[k] for k in members], self.priors, "")
            for k, node in zip(members, found):
                nodes[k] = node
        return VariationalMixtureDistribution(
            [n.point for n in nodes], weights.mean,
            weights.expected_log + np.array([n.offset for n in nodes]),
            weight_prior=self.weight_prior, prior_concentration=self.concentration,
            weight_concentration=weights.concentration,
            posteriors=[n.posteriors for n in nodes],
            kl=weights.kl + sum(n.kl for n in nodes))

    def __repr__(self) -> str:
        return (f"VariationalMixtureEstimator({list(self.components)!r}, "
                f"weight_prior={self.weight_prior!r})")
