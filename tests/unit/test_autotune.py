"""The genetic search of tc_graph.tune with a fake timer: no compiler, no timing."""

from __future__ import annotations

import collections
import math

import pytest

from tc_graph.errors import TcError
from tc_graph.options import FUSION_STRATEGIES, MappingOptions
from tc_graph.tune.search import GeneticSearch
from tc_graph.tune.space import SearchSpace, search_space

DEFAULT = MappingOptions(tile=(8,))


def space() -> SearchSpace:
    return search_space([128, 100, 64], 3, [DEFAULT])


def fake_time(c: MappingOptions) -> float:
    """A made-up runtime with one optimum: tile (32, 16), unroll 4, vector width 8."""
    t = 1.0 + abs(math.log2(c.unroll) - 2) + abs(math.log2(c.vector_width) - 3)
    t += sum(abs(math.log2(a) - math.log2(b)) for a, b in zip(c.tile, (32, 16), strict=False))
    t += 2.0 * abs(len(c.tile) - 2) + (0.5 if c.fusion == "min" else 0.0)
    return t


class Recorder:
    """An Evaluate that counts its calls and what it was asked."""

    def __init__(self, timer=fake_time, fail=lambda c: False, stop_after: int | None = None):
        self.timer, self.fail, self.stop_after = timer, fail, stop_after
        self.asked: list[MappingOptions] = []

    def __call__(self, candidates: list[MappingOptions]) -> list[float | None]:
        out: list[float | None] = []
        for c in candidates:
            if self.stop_after is not None and len(self.asked) >= self.stop_after:
                break
            self.asked.append(c)
            out.append(None if self.fail(c) else self.timer(c))
        return out


def run(seed: int | None = 1, **kw) -> tuple[GeneticSearch, Recorder]:
    rec = kw.pop("recorder", None) or Recorder()
    options = {"population": 12, "generations": 5, "seed": seed, "seeds": [DEFAULT], **kw}
    return GeneticSearch(space(), **options).run(rec), rec


def test_same_seed_same_search_and_another_seed_another():
    a, _ = run(seed=7)
    b, _ = run(seed=7)
    c, _ = run(seed=8)
    assert [h.candidates for h in a.history] == [h.candidates for h in b.history]
    assert [h.candidates for h in a.history] != [h.candidates for h in c.history]


def test_generation_and_population_counts():
    s, rec = run(population=10, generations=4)
    assert len(s.history) == 4
    assert [len(h.candidates) for h in s.history] == [10] * 4
    assert s.history[0].candidates[0] == DEFAULT
    # Each distinct candidate is evaluated once, however often it reappears.
    assert len(rec.asked) == len(set(rec.asked)) == len(s.results)


def test_every_candidate_is_a_point_of_the_space():
    sp = space()
    s, _ = run()
    choices = dict(sp.genes)
    for h in s.history:
        for c in h.candidates:
            assert c.fusion in FUSION_STRATEGIES
            assert all(t in choices["tile0"] for t in c.tile) and len(c.tile) <= sp.tile_depth
            assert c.unroll in choices["unroll"] and c.vector_width in choices["vector_width"]
            assert c.register_tile in choices["register_tile"]
            assert c.parallel_depth in (0, 1) and c.threads == 0


def test_elites_go_on_unmutated():
    s, _ = run(population=20, generations=5, elites=3)
    for prev, cur in zip(s.history, s.history[1:], strict=False):
        assert not cur.restarted
        alive = sorted((t, k) for k, t in enumerate(prev.runtimes) if t is not None)
        top = [prev.candidates[k] for _, k in alive[:3]]
        assert set(top) <= set(cur.candidates)


def test_best_never_gets_worse_and_the_search_improves_on_the_default():
    s, _ = run(population=16, generations=6, seed=3)
    best = [h.best_so_far_s for h in s.history]
    assert best == sorted(best, reverse=True)
    assert s.best is not None and s.best[1] < fake_time(DEFAULT)


def test_children_take_each_gene_from_a_survivor_when_nothing_mutates():
    sp = space()
    s, _ = run(population=12, generations=4, mutation_rate=0.0, elites=1)
    for prev, cur in zip(s.history, s.history[1:], strict=False):
        parents = [sp.encode(c) for c, t in zip(prev.candidates, prev.runtimes, strict=True) if t]
        for child in cur.candidates:
            genome = sp.encode(child)
            for k, value in enumerate(genome):
                name = sp.genes[k][0]
                if name.startswith("tile") and name != "tile_len":
                    continue  # padding genes past the tile's length do not survive encoding
                assert value in {p[k] for p in parents}, (name, value)


def test_restart_from_the_best_when_fewer_than_three_survive():
    rec = Recorder(fail=lambda c: c != DEFAULT)
    s, _ = run(population=8, generations=3, recorder=rec)
    assert [h.restarted for h in s.history] == [False, True, True]
    for h in s.history[1:]:
        assert h.candidates[0] == DEFAULT
        assert len(h.candidates) == 8
        assert len(set(h.candidates)) > 1  # mutations of the best, not copies
    assert s.best == (DEFAULT, fake_time(DEFAULT))


def test_no_restart_with_three_survivors():
    ok = set()

    def fail(c: MappingOptions) -> bool:
        if len(ok) < 3:
            ok.add(c)
        return c not in ok

    s, _ = run(population=8, generations=2, recorder=Recorder(fail=fail))
    assert [h.restarted for h in s.history] == [False, False]


def test_roulette_is_proportional_to_one_over_runtime():
    s = GeneticSearch(space(), population=4, generations=1, seed=0)
    a, b = MappingOptions(unroll=2), MappingOptions(unroll=4)
    counts = collections.Counter(s._roulette([(a, 1.0), (b, 9.0)]) for _ in range(20000))
    assert counts[a] / 20000 == pytest.approx(0.9, abs=0.01)


def test_a_short_answer_stops_the_search():
    s, rec = run(population=10, generations=5, recorder=Recorder(stop_after=15))
    assert s.stopped
    assert len(s.history) == 2 and len(rec.asked) == 15


def test_the_space_holds_powers_of_two_ceil_divisors_and_the_seeds():
    seed = MappingOptions(tile=(7, 3), unroll=1, vector_width=2)
    sp = search_space([100, 48], 2, [seed])
    tiles = dict(sp.genes)["tile0"]
    assert {1, 2, 4, 8, 16, 32, 64} <= set(tiles) and 128 not in tiles
    assert {50, 34, 25, 20, 17, 15, 13, 24, 16, 12, 10, 7, 6, 100, 48} <= set(tiles)
    assert dict(sp.genes)["unroll"] == (1, 2, 4, 8, 16, 32, 64, 128)
    assert 2 in dict(sp.genes)["vector_width"] and 3 in tiles
    assert sp.decode(sp.encode(seed)) == seed
    with pytest.raises(TcError):
        GeneticSearch(sp, population=0, generations=1)


def test_the_cpu_space_holds_dot_tiles_and_reduction_chunks_from_the_sizes():
    sp = search_space([128, 1000, 1024], 2, [MappingOptions(tile=(8,))])
    genes = dict(sp.genes)
    assert (4, 4) in genes["dot_tile"] and (4, 5) in genes["dot_tile"]
    assert genes["reduction_chunk"] == (0, 64, 128, 256, 512, 1024)
    assert 0 in genes["prefetch_distance"] and 8 in genes["prefetch_distance"]
    assert genes["allow_skewing"] == (False, True)
    assert "block" not in genes and "use_shared_memory" not in genes


def test_the_gpu_space_searches_blocks_grids_and_promotion_not_cpu_knobs():
    seed = MappingOptions(tile=(16, 32), block=(32, 4), grid=(7,), shared_depth=1)
    sp = search_space([128, 64], 2, [seed], target="opencl")
    genes = dict(sp.genes)
    assert {"block", "grid", "use_shared_memory", "use_private_memory", "unroll_copy_shared",
            "shared_depth", "private_depth"} <= set(genes)  # fmt: skip
    cpu = {"vector_width", "register_tile", "dot_tile", "parallel_depth", "prefetch_distance",
           "allow_skewing"}  # fmt: skip
    assert not cpu & set(genes)
    assert (32, 4) in genes["block"] and (7,) in genes["grid"] and () in genes["grid"]
    assert all(math.prod(b) <= 1024 for b in genes["block"])
    assert sp.decode(sp.encode(seed)) == seed
    rng = __import__("random").Random(0)
    for _ in range(200):  # every point of the space is a valid MappingOptions
        c = sp.decode(sp.random_genome(rng))
        assert c.vector_width == seed.vector_width and c.dot_tile == seed.dot_tile
