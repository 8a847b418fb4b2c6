"""The genetic search of the autotuner (TC paper, section 6.2). It knows nothing about
kernels: it maps candidates to runtimes through a callable, so it can be tested with a
fake timer."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import TcError
from ..options import MappingOptions
from .space import SearchSpace

MUTATION_RATE = 0.1
"""Probability that a gene of a new candidate gets a random value (the paper's "low")."""
ELITE_FRACTION = 0.1
"""The best tenth of a generation goes to the next one unmutated."""
RESTART_MUTATION_RATE = 0.5
"""When fewer than three candidates survive, the next generation is the best so far and
heavy mutations of it."""


@dataclass(frozen=True)
class GenerationStats:
    """One generation of a search, in seconds."""

    index: int
    candidates: tuple[MappingOptions, ...]
    runtimes: tuple[float | None, ...]  # None: discarded
    best_so_far_s: float | None
    median_s: float | None  # of this generation's surviving candidates
    restarted: bool  # this generation was bred from the best alone


Evaluate = Callable[[list[MappingOptions]], list[float | None]]
"""Runtimes in seconds (None: discarded) of the candidates, in order. A shorter list means
the evaluation was stopped (Ctrl-C, time budget): the search ends after it."""


class GeneticSearch:
    """Genetic search as in the TC paper: each new candidate has three parents drawn by
    roulette (fitness 1/runtime), takes each gene from one of them at random and
    mutates each gene with probability `mutation_rate`; the elites go on unmutated. When
    fewer than three candidates of a generation survive, the next one restarts from the
    best so far. Runtimes are memoized, so a candidate is evaluated once."""

    def __init__(
        self,
        space: SearchSpace,
        *,
        population: int,
        generations: int,
        seed: int | None = None,
        seeds: Sequence[MappingOptions] = (),
        mutation_rate: float = MUTATION_RATE,
        elites: int | None = None,
    ) -> None:
        if population < 1 or generations < 1:
            raise TcError("population and generations must be at least 1")
        self.space = space
        self.population = population
        self.generations = generations
        self.rng = random.Random(seed)
        self.seeds = list(dict.fromkeys(seeds))
        self.mutation_rate = mutation_rate
        self.elites = max(1, round(ELITE_FRACTION * population)) if elites is None else elites
        self.results: dict[MappingOptions, float | None] = {}
        self.history: list[GenerationStats] = []
        self.stopped = False

    # The best candidate so far and its runtime; ties go to the earliest (the default).
    @property
    def best(self) -> tuple[MappingOptions, float] | None:
        scored = [(t, k, c) for k, (c, t) in enumerate(self.results.items()) if t is not None]
        if not scored:
            return None
        t, _, c = min(scored, key=lambda x: (x[0], x[1]))
        return c, t

    def fastest(self, n: int) -> list[MappingOptions]:
        """The n candidates with the shortest runtimes, fastest first."""
        scored = [(t, k, c) for k, (c, t) in enumerate(self.results.items()) if t is not None]
        return [c for _, _, c in sorted(scored, key=lambda x: (x[0], x[1]))[:n]]

    def first_generation(self) -> list[MappingOptions]:
        pop = list(self.seeds[: self.population])
        for _ in range(50 * self.population):
            if len(pop) >= self.population:
                break
            c = self.space.decode(self.space.random_genome(self.rng))
            if c not in pop:
                pop.append(c)
        while len(pop) < self.population:  # a space smaller than the population
            pop.append(self.space.decode(self.space.random_genome(self.rng)))
        return pop

    def _roulette(self, scored: list[tuple[MappingOptions, float]]) -> MappingOptions:
        weights = [1.0 / max(t, 1e-12) for _, t in scored]
        return self.rng.choices([c for c, _ in scored], weights=weights)[0]

    def _fresh(self, make: Callable[[], MappingOptions], taken: list[MappingOptions]) -> None:
        """Append a candidate not evaluated or taken yet, if a few tries find one."""
        c = make()
        for _ in range(20):
            if c not in self.results and c not in taken:
                break
            c = make()
        taken.append(c)

    def next_generation(self, current: list[MappingOptions]) -> tuple[list[MappingOptions], bool]:
        """The next population, and whether it restarted from the best."""
        space, rng = self.space, self.rng
        survivors: dict[MappingOptions, float] = {}
        for c in current:
            t = self.results.get(c)
            if t is not None:
                survivors[c] = t
        scored = sorted(survivors.items(), key=lambda x: x[1])
        nxt: list[MappingOptions] = []
        if len(scored) < 3:
            best = self.best
            if best is None:
                return [
                    space.decode(space.random_genome(rng)) for _ in range(self.population)
                ], True
            nxt.append(best[0])
            genome = space.encode(best[0])
            while len(nxt) < self.population:
                self._fresh(
                    lambda: space.decode(space.mutate(genome, rng, RESTART_MUTATION_RATE)), nxt
                )
            return nxt, True
        nxt.extend(c for c, _ in scored[: self.elites])

        def child() -> MappingOptions:
            parents = [space.encode(self._roulette(scored)) for _ in range(3)]
            genome = tuple(rng.choice(parents)[k] for k in range(len(space.genes)))
            return space.decode(space.mutate(genome, rng, self.mutation_rate))

        while len(nxt) < self.population:
            self._fresh(child, nxt)
        return nxt, False

    def run(
        self,
        evaluate: Evaluate,
        on_generation: Callable[[GenerationStats], None] | None = None,
    ) -> GeneticSearch:
        population, restarted = self.first_generation(), False
        for g in range(self.generations):
            new = list(dict.fromkeys(c for c in population if c not in self.results))
            got = evaluate(new)
            for c, t in zip(new, got, strict=False):
                self.results[c] = t
            if len(got) < len(new):
                self.stopped = True
            runtimes = tuple(self.results.get(c) for c in population)
            alive = [t for t in runtimes if t is not None]
            best = self.best
            stats = GenerationStats(
                g,
                tuple(population),
                runtimes,
                best[1] if best else None,
                statistics.median(alive) if alive else None,
                restarted,
            )
            self.history.append(stats)
            if on_generation is not None:
                on_generation(stats)
            if self.stopped or g == self.generations - 1:
                break
            population, restarted = self.next_generation(population)
        return self
