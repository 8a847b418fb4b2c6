"""The search space of the autotuner: one gene per tuning knob of MappingOptions, and the
values each may take for a program's sizes (TC paper, section 6.2)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..options import FUSION_STRATEGIES, MappingOptions

MAX_TILE_DEPTH = 3
MAX_UNROLL = 128
"""Full unrolling of longer loops only bloats the code on a CPU (and its compile time)."""
VECTOR_WIDTHS = (4, 8, 16)
"""Wider vectors than AVX-512's 16 floats buy nothing on a CPU."""
REGISTER_TILES = (0, 1, 2, 4, 8)
DOT_TILES = ((1, 8), (2, 4), (2, 8), (3, 4), (3, 8), (4, 2), (4, 4), (4, 5), (4, 6), (5, 4),
             (6, 4), (8, 2), (8, 3))  # fmt: skip
"""Rows x columns of a contraction tile: up to 24 vector accumulators of AVX-512's 32."""
MICRO_TILES = ((), (4, 2), (6, 1), (6, 2), (8, 2), (4, 3), (12, 2))
"""Rows x vectors of an outer-product block; () sizes it from the CPU's registers."""
PREFETCH_DISTANCES = (0, 2, 4, 8, 16, 32)
MAX_GRID = 1024
CEIL_DIVISORS = range(2, 9)


@dataclass(frozen=True)
class SearchSpace:
    """Genes (one per tuning knob, named after its MappingOptions field, the tile sizes
    as tile_len, tile0, tile1, ...) and the values each may take. Knobs that are not
    searched (threads, and the other target's) keep their value in `base`."""

    genes: tuple[tuple[str, tuple[Any, ...]], ...]
    base: MappingOptions
    tile_depth: int

    def encode(self, options: MappingOptions) -> tuple[Any, ...]:
        """The genome of options (the tile sizes past its length are padding)."""
        tile = list(options.tile[: self.tile_depth])
        pad = dict(self.genes)["tile0"][0]
        tile += [pad] * (self.tile_depth - len(tile))
        tiles = {"tile_len": len(options.tile), **{f"tile{k}": t for k, t in enumerate(tile)}}
        return tuple(
            tiles[name] if name in tiles else getattr(options, name) for name, _ in self.genes
        )

    def decode(self, genome: Sequence[Any]) -> MappingOptions:
        g = dict(zip((name for name, _ in self.genes), genome, strict=True))
        tile = tuple(g.pop(f"tile{k}") for k in range(self.tile_depth))[: g.pop("tile_len")]
        return replace(self.base, tile=tile, **g)

    def random_genome(self, rng: random.Random) -> tuple[Any, ...]:
        return tuple(rng.choice(choices) for _, choices in self.genes)

    def mutate(self, genome: Sequence[Any], rng: random.Random, rate: float) -> tuple[Any, ...]:
        return tuple(
            rng.choice(choices) if rng.random() < rate else v
            for v, (_, choices) in zip(genome, self.genes, strict=True)
        )


def _powers_of_two(limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit:
        out.append(p)
        p *= 2
    return out


def _blocks(top: int) -> set[tuple[int, ...]]:
    """Thread blocks of 1 to 3 power-of-two dimensions, x up to the largest size (and 256),
    at least a few threads and at most 1024 of them."""
    xs = _powers_of_two(min(256, max(32, top)))
    ys = _powers_of_two(32)
    out: set[tuple[int, ...]] = {(x,) for x in xs if x >= 8}
    out |= {(x, y) for x in xs for y in ys if y > 1 and 8 <= x * y <= 1024}
    out |= {(x, y, 2) for x in xs for y in ys if y > 1 and 8 <= x * y * 2 <= 1024 and x >= 8}
    return out


def search_space(
    sizes: Sequence[int],
    loop_depth: int,
    seeds: Sequence[MappingOptions],
    *,
    target: str = "cpu",
) -> SearchSpace:
    """The search space of a target for these problem sizes (TC paper 6.2): tile sizes
    are powers of two and ceil-divisors of the sizes (tiles that avoid a short tail),
    unroll factors powers of two up to the largest size, and every fusion strategy. The
    CPU adds both schedulers (with and without skewing), the parallel depth, vector width,
    register tile, dot-product tile, outer-product block, reduction chunk (powers of two up to the largest
    size) and prefetch distance; GPU targets the blocks, grids, shared and private promotion switches, the
    shared depth and the private depth (0 or 1). Every seed is a point of the space."""
    sizes = [s for s in sizes if s > 0] or [1]
    top = max(sizes)
    tiles = set(_powers_of_two(top)) | {s for s in sizes}
    tiles |= {-(-s // k) for s in sizes for k in CEIL_DIVISORS if -(-s // k) > 1}
    depth = max(1, min(MAX_TILE_DEPTH, loop_depth), *(len(s.tile) for s in seeds))
    for s in seeds:
        tiles |= set(s.tile)
    choices: dict[str, set[Any]] = {
        "fusion": set(FUSION_STRATEGIES),
        "unroll": set(_powers_of_two(min(MAX_UNROLL, 1 << max(0, (top - 1).bit_length())))),
    }
    if target == "cpu":
        choices |= {
            "allow_skewing": {False, True},
            "parallel_depth": {0, 1},
            "vector_width": set(VECTOR_WIDTHS),
            "register_tile": set(REGISTER_TILES),
            "dot_tile": set(DOT_TILES),
            "micro_tile": set(MICRO_TILES),
            "reduction_chunk": {0, *(p for p in _powers_of_two(top) if p >= 64)},
            "prefetch_distance": set(PREFETCH_DISTANCES),
        }
    else:
        blocks = _blocks(top)
        choices |= {
            "block": blocks,
            "grid": {(), *((g,) for g in _powers_of_two(MAX_GRID) if g >= 8)},
            "use_shared_memory": {False, True},
            "use_private_memory": {False, True},
            "unroll_copy_shared": {False, True},
            "shared_depth": set(range(depth + 1)),
            # 1 holds a thread's accumulator across its whole reduction nest; deeper values
            # depend on the program and mostly repeat the default (docs/gpu.md).
            "private_depth": {0, 1},
        }
    for s in seeds:
        for name, values in choices.items():
            values.add(getattr(s, name))
    fusions = choices.pop("fusion")
    genes: list[tuple[str, tuple[Any, ...]]] = [
        ("fusion", tuple(f for f in FUSION_STRATEGIES if f in fusions)),
        ("tile_len", tuple(range(depth + 1))),
        *((f"tile{k}", tuple(sorted(tiles))) for k in range(depth)),
        *((name, tuple(sorted(values))) for name, values in choices.items()),
    ]
    base = seeds[0] if seeds else MappingOptions()
    return SearchSpace(tuple(genes), base, depth)
