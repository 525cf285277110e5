"""Hidden Markov model: a Markov chain of hidden states, one emission law per state.

Rows are variable-length sequences of items; every item is emitted by the hidden state of its
time step, from that state's emission distribution of any family (a leaf, a mixture, a record...).
The E-step is the scaled forward-backward recursion of :mod:`mixfold.compute.forward_backward`,
batched over all the sequences of a chunk (compiled, or one (B x S) @ (S x S) product per time
step); the posterior state probabilities of the items go to the emission accumulators as
ordinary row weights (:class:`~mixfold.families.units.UnitAccumulators`), as a mixture's
responsibilities do.

Length-0 sequences: without a terminal law the model is a law of the items *given* the length,
so an empty sequence has probability one (log-density 0) and adds no statistics. With a terminal
law the chain always emits at least one item, so an empty sequence has log-density -inf (a fit
on data that contains one reports it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mixfold.compute.forward_backward import (Chain, Lattice, chain_posteriors, expected_length,
                                              independent_counts, safe_divisor, viterbi_paths)
from mixfold.compute.labelled import Labelled
from mixfold.compute.seeding import indistinct_units
from mixfold.decomposition import DecompAxis, Decomposition, ReductionOp
from mixfold.errors import ParameterError
from mixfold.families._dirichlet_prior import CONCENTRATION, dirichlet_mode
from mixfold.families._protocol import (Accumulator, AccumulatorFactory, Distribution, Encoder,
                                        Estimator, InitRandom, family)
from mixfold.families._shared_covariance import estimate_children
from mixfold.families._states import (EmissionEstimators, EmissionStates, StatesFold,
                                      bind_emissions)
from mixfold.families.markov_chain import stochastic
from mixfold.families.mixture import MixtureEstimator
from mixfold.families.sequence import SequenceEncoded
from mixfold.families.units import UnitAccumulators, Units, encoding_slots, seeded_posteriors
from mixfold.options import flag, number
from mixfold.precision.bands import FLOAT64, Precision

__all__ = ["HiddenMarkovDistribution", "HiddenMarkovEstimator", "HiddenMarkovAccumulator"]


@family("HiddenMarkov")
class HiddenMarkovDistribution(EmissionStates, Distribution):
    """Hidden Markov model over sequences: ``emissions[s]`` is the law of an item in state s.

    The arguments follow :class:`MixtureDistribution`'s order (the state laws first, then the
    probabilities that choose among them): ``initial`` (S,) are the probabilities of the first
    state, ``transitions`` (S, S) the row-stochastic matrix ``P(next = j | state = i)``, and
    ``terminal`` (S,), optional, the probability that the sequence ends after an item emitted in
    state i (it continues with probability ``1 - terminal[i]``, then moves by ``transitions``)::

        p(x_1..x_T) = sum over paths of  initial[s_1] e_{s_1}(x_1)
                      * prod_t (1 - terminal[s_{t-1}]) transitions[s_{t-1}, s_t] e_{s_t}(x_t)
                      * terminal[s_T]

    Without ``terminal`` the terminal factors are dropped: the model is the law of the items
    given the length, and an empty sequence has log-density 0. With it the length is modelled
    (at least one item; an empty sequence has log-density -inf).

    >>> from mixfold import GaussianDistribution
    >>> hmm = HiddenMarkovDistribution([GaussianDistribution(-1, 1), GaussianDistribution(1, 1)],
    ...                                [0.5, 0.5], [[0.9, 0.1], [0.1, 0.9]])
    >>> round(hmm.log_density([-1.0, -0.8, 1.2]), 6)
    -5.066696
    >>> hmm.viterbi([-1.0, -0.8, 1.2]).tolist()
    [0, 0, 1]
    >>> hmm.posterior([-1.0, 1.2]).round(3).tolist()
    [[0.596, 0.404], [0.272, 0.728]]
    >>> hmm.log_density([])
    0.0
    """

    parameter_coordinates = {"emissions": "parts", "initial": "simplex",
                             "transitions": "simplex", "terminal": "unit"}

    def __init__(self, emissions: Sequence[Distribution], initial: Sequence[float],
                 transitions: Sequence[Sequence[float]], terminal: Sequence[float] | None = None):
        self.emissions = tuple(emissions)
        s = len(self.emissions)
        if s == 0:
            raise ParameterError("a hidden Markov model needs at least one state (emission)")
        bad = [type(e).__name__ for e in self.emissions if not isinstance(e, Distribution)]
        if bad:
            raise ParameterError(f"emissions must be Distributions, got a {bad[0]}")
        self.initial = stochastic("initial", initial, (s,))
        self.transitions = stochastic("transitions", transitions, (s, s))
        self.terminal = None
        keep = np.ones(s)
        if terminal is not None:
            tau = np.array(terminal, dtype=np.float64)
            if tau.shape != (s,) or not (np.isfinite(tau).all() and (tau >= 0).all()
                                         and (tau <= 1).all()):
                raise ParameterError(f"terminal must be None or {s} probabilities in [0, 1], "
                                     f"got {tau.tolist()}")
            self.terminal = tau
            keep = 1.0 - tau
        # one step of the chain that continues: P(go on from i, then move to j)
        self.chain = Chain(self.initial, keep[:, None] * self.transitions, self.terminal)
        self.units = Units(self.emissions)

    def log_density_from_columns(self, enc: SequenceEncoded, scores: np.ndarray) -> np.ndarray:
        return Lattice(self.chain, scores, enc.offsets).log_likelihood

    def seq_log_density(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        enc, scores = self.labelled_scores(enc, precision)
        return self.log_density_from_columns(enc, scores)

    def seq_posterior(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """Posterior state probabilities of every flat item, array of shape (n_items, S).

        Row ``j`` belongs to item ``j`` of ``enc.items``; sequence ``i`` holds the items
        ``enc.offsets[i]:enc.offsets[i + 1]``.
        """
        enc, scores = self.labelled_scores(enc, precision)
        lattice = Lattice(self.chain, scores, enc.offsets)
        return lattice.tm.flat(lattice.posteriors())

    def seq_viterbi(self, enc: SequenceEncoded, precision: Precision = FLOAT64) -> np.ndarray:
        """The most probable state path, as the state of every flat item: int64 (n_items,)."""
        return viterbi_paths(self.chain, self.emission_log_densities(enc.items, precision),
                             enc.offsets)

    def estimator(self, **options: Any) -> HiddenMarkovEstimator:
        options.setdefault("terminal", self.terminal is not None)
        return HiddenMarkovEstimator([e.estimator() for e in self.emissions], **options)

    def _sample(self, n: int, rng: np.random.Generator) -> list[list]:
        if self.terminal is None:
            raise ValueError("this HiddenMarkovDistribution has no terminal law to draw lengths "
                             "from: give it one or use sampler(seed, sample_length=L)")
        return self._draw(n, rng, None)

    def _draw(self, n: int, rng: np.random.Generator, length: int | None) -> list[list]:
        s = self.num_states
        cum_init, cum_step = np.cumsum(self.initial), np.cumsum(self.transitions, axis=1)
        rows, states = [], []
        alive = np.arange(n)
        state = np.minimum((rng.random(n)[:, None] >= cum_init).sum(axis=1), s - 1)
        while alive.size and (length is None or len(rows) < length):
            rows.append(alive)
            states.append(state)
            if length is None:
                going_on = rng.random(alive.size) >= self.terminal[state]
                alive, state = alive[going_on], state[going_on]
            u = rng.random(alive.size)
            state = np.minimum((u[:, None] >= cum_step[state]).sum(axis=1), s - 1)
        row_of = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        state_of = np.concatenate(states) if states else np.zeros(0, dtype=np.int64)
        state_of = state_of[np.argsort(row_of, kind="stable")]  # row-major, steps in order
        items = self.draw_items(state_of, rng)
        counts = np.bincount(row_of, minlength=n)
        ends = np.cumsum(counts).tolist()
        return [items[e - c:e] for e, c in zip(ends, counts.tolist())]

    def n_parameters(self) -> int:
        s = self.num_states
        chain = s - 1 + s * (s - 1) + (0 if self.terminal is None else s)
        return chain + sum(d.n_parameters() for d in self.parts())

    def _params(self) -> dict[str, Any]:
        return {"emissions": [e.to_dict() for e in self.emissions],
                "initial": self.initial.tolist(), "transitions": self.transitions.tolist(),
                "terminal": None if self.terminal is None else self.terminal.tolist()}

    @classmethod
    def _from_params(cls, p: dict[str, Any]) -> HiddenMarkovDistribution:
        return cls([Distribution.from_dict(e) for e in p["emissions"]], p["initial"],
                   p["transitions"], p.get("terminal"))

    def decomposition(self) -> Decomposition:
        """STATE: the emissions are the units, each scoring every item; the chain couples them
        through the forward-backward recursion (S^2 per item, run centrally), and its initial,
        transition and terminal probabilities are held whole by every worker. Emissions of
        one stackable family are scored together (fused).
        """
        s, items = self.num_states, expected_length(self.chain)
        own = [self.initial, self.transitions, self.chain.step]
        own += [] if self.terminal is None else [self.terminal]
        return Decomposition(DecompAxis.STATE, ReductionOp.LOGSUMEXP_RESPONSIBILITY,
                             units=self.emissions,
                             child_roles=tuple(f"state_{k}" for k in range(s)),
                             fused=self.units.stack is not None, unit_rows=items,
                             row_work=items * (s * s + s),
                             param_bytes=sum(a.nbytes for a in own))


# ---------------------------------------------------------------------------------------------
# Accumulator and estimator


class HiddenMarkovAccumulator(StatesFold, Accumulator):
    """Statistics: expected initial-state counts (S,), transition counts (S, S), terminal
    counts (S,) when the terminal law is fitted, and one accumulator per state emission."""

    def __init__(self, emissions: Sequence[Accumulator], slots: tuple[int, ...] | None,
                 terminal: bool = False, keys: str | None = None):
        self.emissions = list(emissions)
        self.keys = keys
        s = len(self.emissions)
        self.initial = np.zeros(s)
        self.transitions = np.zeros((s, s))
        self.terminal = np.zeros(s) if terminal else None
        self.units = UnitAccumulators(self.emissions, slots)

    def own_arrays(self) -> list[np.ndarray]:
        counts = [self.initial, self.transitions]
        return counts if self.terminal is None else counts + [self.terminal]

    def posteriors_from_columns(self, enc: SequenceEncoded, weights: np.ndarray,
                                model: HiddenMarkovDistribution,
                                scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The forward-backward step (:func:`~mixfold.compute.forward_backward.
        chain_posteriors`), between scoring the states' emissions (``scores``, (n_items, S))
        and adding the items to them: adds the chain's expected counts and returns
        (row-weighted item posteriors (n_items, S) in flat order, per-row log-likelihood)."""
        return chain_posteriors(model.chain, scores, enc.offsets, weights, self.own_arrays())

    def seq_initialize(self, enc: SequenceEncoded, weights: np.ndarray, rng: InitRandom) -> None:
        resp = seeded_posteriors(enc.items, len(self.emissions), rng)
        weighted = resp * np.repeat(weights, enc.counts())[:, None]
        initial, transitions, terminal = independent_counts(enc.offsets, resp, weighted)
        self.initial += initial
        self.transitions += transitions
        if self.terminal is not None:
            self.terminal += terminal
        self.units.initialize(enc.items, weighted, rng)


class HiddenMarkovEstimator(EmissionEstimators, Estimator):
    """Estimator of a hidden Markov model with one state per emission estimator.

    ``pseudo_count`` is added to every expected initial, transition (and, with ``terminal``,
    stop and go-on) count before normalising (a symmetric Dirichlet prior). ``initial_prior``
    (a number or (S,)) and ``transition_prior`` (a number or (S, S), row i the prior of state
    i's transitions): Dirichlet concentrations instead, the estimate their maximum a posteriori
    ``max(counts + prior - 1, 0)`` normalised (hmmlearn's ``startprob_prior`` and
    ``transmat_prior``; :mod:`mixfold.families._dirichlet_prior`). ``terminal=True``
    also fits the probability of ending the sequence in each state. Emission estimators with the
    same ``keys`` share their parameters (tied states).

    >>> import mixfold
    >>> from mixfold import GaussianDistribution, GaussianEstimator
    >>> truth = HiddenMarkovDistribution([GaussianDistribution(-2, 1), GaussianDistribution(2, 1)],
    ...                                  [0.5, 0.5], [[0.9, 0.1], [0.2, 0.8]])
    >>> rows = truth.sampler(0, sample_length=20).sample(300)
    >>> fit = mixfold.optimize(rows, HiddenMarkovEstimator([GaussianEstimator()] * 2),
    ...                        progress=False)
    >>> order = np.argsort([e.mu for e in fit.emissions])
    >>> [round(fit.emissions[k].mu) for k in order]
    [-2, 2]
    >>> fit.transitions[np.ix_(order, order)].round(1).tolist()
    [[0.9, 0.1], [0.2, 0.8]]
    """

    option_rules = {"pseudo_count": number(0), "terminal": flag(),
                    "initial_prior": CONCENTRATION, "transition_prior": CONCENTRATION}

    def __init__(self, emissions: Sequence[Estimator], pseudo_count: float = 0.0,
                 terminal: bool = False, keys: str | None = None, *,
                 initial_prior: Any = None, transition_prior: Any = None):
        self.emissions = tuple(emissions)
        if not self.emissions:
            raise ValueError("a hidden Markov model needs at least one emission estimator")
        bad = [type(e).__name__ for e in self.emissions if not isinstance(e, Estimator)]
        if bad:
            raise TypeError(f"emissions must be Estimators, got a {bad[0]}")
        self.check_options(pseudo_count=pseudo_count, terminal=terminal,
                           initial_prior=initial_prior, transition_prior=transition_prior)
        self.pseudo_count = float(pseudo_count)
        self.terminal = bool(terminal)
        self.keys = keys
        self.initial_prior = initial_prior
        self.transition_prior = transition_prior

    def bind(self, encoder: Encoder) -> HiddenMarkovEstimator:
        emissions = bind_emissions(self.emissions, encoder, "hidden Markov")
        return HiddenMarkovEstimator(emissions, self.pseudo_count, self.terminal, self.keys,
                                     initial_prior=self.initial_prior,
                                     transition_prior=self.transition_prior)

    def _make(self) -> HiddenMarkovAccumulator:
        return HiddenMarkovAccumulator([e.accumulator_factory().make() for e in self.emissions],
                                       encoding_slots(self.encoder().item), self.terminal,
                                       self.keys)

    def accumulator_factory(self) -> AccumulatorFactory:
        return AccumulatorFactory(self._make)

    def estimate(self, nobs: float, stats: Any) -> HiddenMarkovDistribution:
        own, emission_stats = stats
        initial_counts, transition_counts = own[0], own[1]
        pc, s = self.pseudo_count, self.num_states
        mass = dirichlet_mode(initial_counts, self.initial_prior, pc)
        initial = mass / mass.sum() if mass.sum() > 0 else np.full(s, 1.0 / s)
        rows = dirichlet_mode(transition_counts, self.transition_prior, pc)
        totals = rows.sum(axis=1, keepdims=True)
        transitions = np.where(totals > 0, rows / safe_divisor(totals), 1.0 / s)
        terminal = None
        if self.terminal:
            stops = own[2] + pc
            trials = stops + transition_counts.sum(axis=1) + pc
            terminal = np.where(trials > 0, stops / safe_divisor(trials), 0.5)
        # every visit of a state is a first step or the end of a transition
        visits = initial_counts + transition_counts.sum(axis=0)
        emissions = estimate_children(self.emissions, visits, emission_stats)
        return HiddenMarkovDistribution(emissions, initial, transitions, terminal)

    def initial_guess(self, sample: SequenceEncoded, weights: np.ndarray,
                      rng: InitRandom) -> HiddenMarkovDistribution:
        """Seed the emissions as a mixture of the sample's items would be (k-means++ for
        Gaussian families), then the chain from the mixture posteriors of consecutive items.

        The counts are smoothed towards uniform, so no initial state, transition or stop
        starts at probability zero.
        """
        labels = sample if isinstance(sample, Labelled) else None
        sample = sample if labels is None else labels.inner
        items = sample.items if labels is None else Labelled(sample.items, labels.prior)
        item_weights = np.repeat(weights, sample.counts())
        mixture = MixtureEstimator(self.emissions).initial_guess(items, item_weights,
                                                                 rng.child("emissions"))
        # one symbol an item: the items alone make every state the marginal (a saddle EM never
        # leaves); seeded random posteriors of the items tell the states apart
        if indistinct_units(mixture.components, sample.items):
            acc = self.accumulator_factory().make()
            acc.seq_initialize(sample, weights, rng.child("random states"))
            acc.tie_keys()
            return self.estimate(float(weights.sum()), acc.value())
        resp = mixture.seq_posterior(items)
        initial, transitions, stops = independent_counts(sample.offsets, resp,
                                                         resp * item_weights[:, None])
        s = self.num_states
        smooth = 0.01 * max(float(item_weights.sum()), 1.0) / s
        initial = initial + smooth
        transitions = transitions + smooth
        terminal = None
        if self.terminal:
            visits = initial + transitions.sum(axis=0)
            terminal = np.clip((stops + smooth) / (visits + 2 * smooth), 1e-3, 1 - 1e-3)
        return HiddenMarkovDistribution(mixture.components, initial / initial.sum(),
                                        transitions / transitions.sum(axis=1, keepdims=True),
                                        terminal)

    def __repr__(self) -> str:
        opts = f", pseudo_count={self.pseudo_count!r}" if self.pseudo_count else ""
        opts += ", terminal=True" if self.terminal else ""
        opts += "".join(f", {name}={getattr(self, name)!r}" for name in
                        ("initial_prior", "transition_prior") if getattr(self, name) is not None)
        opts += f", keys={self.keys!r}" if self.keys is not None else ""
        return f"HiddenMarkovEstimator({list(self.emissions)!r}{opts})"
