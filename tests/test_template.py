"""The template proposer with the real kernel families, the stand-in evaluator and a real archive:
valid, distinct, deterministic candidates; lineage; archive skipping; convergence to the best
configuration of a hidden cost; and a run through the real search loop."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import random
import time

import pytest
from hgemm.agent.model import predict_us
from hgemm.agent.proposer import ProposalContext
from hgemm.agent.template import TemplateProposer, config_key
from hgemm.evaluator.kernels import FAMILIES
from hgemm.evaluator.kernels.family import Family
from standin import StandinEvaluator

from hgemm.core.record import kernel_hash, utc_now
from hgemm.core.shape import Shape

GPU = StandinEvaluator().gpu_info()


def hidden_factor(family: str, params: dict) -> float:
    """The 'true' cost relative to the model: a fixed +-25% per configuration the model cannot see."""
    digest = hashlib.sha256(repr(config_key(family, params)).encode()).digest()
    return 0.75 + 0.5 * digest[0] / 255


@dataclasses.dataclass
class Timed(Family):
    """A real family whose rendered source tells the stand-in evaluator how fast it is."""

    inner: Family | None = None

    def check(self, params, shape, gpu=None):
        return Family.check(self, params, shape, gpu) or self.inner.check(params, shape, gpu)

    def default_params(self, shape, gpu=None):
        return self.inner.default_params(shape, gpu)

    def truth(self, params, shape) -> float:
        return predict_us(self.inner, params, shape, GPU) * hidden_factor(self.name, params)

    def render(self, params):
        # The stand-in multiplies its base time by this factor; the kernel text is the real family's.
        return f"// STANDIN_SPEED {self.truth(params, self.shape) / 100.0:.6f}\n" + self.inner.render(params)


def timed(name: str, shape, **space_override) -> Timed:
    inner = FAMILIES[name]
    fam = Timed(
        name=name, template=inner.template, space={**inner.space, **space_override}, min_cc=inner.min_cc
    )
    fam.inner, fam.shape = inner, shape
    return fam


def ctx(shape, **kw) -> ProposalContext:
    return ProposalContext(shape, GPU, **kw)


def drive(proposer, evaluator, shape, rounds, n=8, archive=None):
    """A minimal propose -> evaluate -> observe loop (the real loop is tested below)."""
    results, proposed = [], []
    for _ in range(rounds):
        cands = proposer.propose(ctx(shape, archive=archive), n)
        if not cands:
            break
        proposed += cands
        records = evaluator.evaluate([c.source for c in cands], shape, stage="quick", modes=("offline",))
        pairs = list(zip(cands, records, strict=True))
        if archive is not None:
            for c, r in pairs:
                archive.record(c, r)
        results += pairs
        proposer.observe(pairs)
    return proposed, results


def takers(shape: Shape) -> set[str]:
    """The families whose default takes `shape` on the GPU (gemv only M <= 4)."""
    return {name for name, f in FAMILIES.items()
            if f.min_cc <= float(GPU.cc) and (d := f.default_params(shape, GPU)) and f.check(d, shape, GPU) is None}  # fmt: skip


def test_first_batch_is_valid_distinct_and_covers_every_family():
    shape = Shape(1024, 1024, 1024)
    p = TemplateProposer(seed=1)
    cands = p.propose(ctx(shape), 8)
    assert len(cands) == 8
    assert len({c.hash for c in cands}) == 8
    assert {c.family for c in cands} == takers(shape)
    for c in cands:
        fam = FAMILIES[c.family]
        assert c.proposer == "template"
        assert fam.check(c.params, shape, GPU) is None
        assert c.source == fam.render(c.params)
        assert "hgemm_run" in c.source


def test_families_that_cannot_run_on_the_gpu_are_never_proposed():
    ampere = dataclasses.replace(GPU, name="NVIDIA A100-SXM4-80GB", cc="8.0", sm_count=108)
    p = TemplateProposer(seed=0)
    cands = p.propose(ProposalContext(Shape(2048, 2048, 2048), ampere), 16)
    assert cands and all(FAMILIES[c.family].min_cc <= 8.0 for c in cands)


def test_deterministic_for_a_seed():
    shape = Shape(768, 512, 2048)
    runs = []
    for _ in range(2):
        p = TemplateProposer(seed=7)
        proposed, _ = drive(p, StandinEvaluator(), shape, rounds=4)
        runs.append([c.hash for c in proposed])
    assert runs[0] == runs[1] and len(runs[0]) == 32


def test_neighbours_of_measured_configurations_name_their_parents():
    shape = Shape(2048, 2048, 1024)
    p = TemplateProposer(seed=3, explore=0.0)
    proposed, results = drive(p, StandinEvaluator(), shape, rounds=3)
    by_hash = {c.hash: c for c in proposed}
    children = [c for c in proposed[8:] if c.parents]
    assert children, "later rounds grow from measured configurations"
    for child in children:
        for parent in child.parents:
            assert parent in by_hash  # parents are kernels this run measured
        if child.note.startswith("neighbour"):
            parent = by_hash[child.parents[0]]
            assert parent.family == child.family
            assert child.params in one_step_moves(child.family, parent.params)


def one_step_moves(family: str, params: dict) -> list[dict]:
    """Every configuration one parameter step away from `params`, after the family's `repair`, each
    also with the deepest ring where the family repairs (the ring-filling variant of a move)."""
    fam = FAMILIES[family]
    deepest = max(fam.space["stages"]) if "stages" in fam.space and hasattr(fam, "repair") else None
    out = []
    for name, values in fam.space.items():
        values = list(values)
        if name not in params:
            continue
        i = values.index(params[name])
        for j in (i - 1, i + 1):
            if 0 <= j < len(values):
                out.append(fam.repair({**params, name: values[j]}))
                if deepest is not None:
                    out.append(fam.repair({**params, name: values[j], "stages": deepest}))
    return out


def test_a_move_that_frees_shared_memory_also_comes_with_the_deeper_ring():
    # 128x256 with the whole C tile staged fits 3 stages; staging C in two 64-column panels frees
    # room for a 4th. One move must reach the 4-deep panel kernel (H100: 12288x256x16384 191 -> 181 us).
    wgmma = FAMILIES["wgmma"]
    p = TemplateProposer({"wgmma": wgmma}, seed=0)
    whole = wgmma.repair({**wgmma.default_params(Shape(12288, 256, 16384)), "epi_panels": 0})
    assert whole["stages"] == 3
    moves = [wgmma.repair(m) for m in p._neighbours("wgmma", whole)]
    assert {**whole, "epi_panels": 2, "stages": 4} in moves
    assert {**whole, "epi_panels": 2} in moves  # the plain move stays


def test_neighbour_moves_are_repaired_into_valid_configurations():
    # 4096 x 64 x 8192: the wgmma default splits K in two inside a cluster (split_dsmem). The move
    # split_k 2 -> 1 alone would leave split_dsmem=1, which check refuses; repair clears it, so the
    # search still reaches the unsplit kernels from that seed.
    shape = Shape(4096, 64, 8192)
    p = TemplateProposer({"wgmma": FAMILIES["wgmma"]}, seed=0, explore=0.0, random_samples=0)
    proposed, _ = drive(p, StandinEvaluator(), shape, rounds=3)
    wgmma = [c for c in proposed if c.family == "wgmma"]
    assert any(c.params["split_dsmem"] for c in wgmma)
    assert any(c.params["split_k"] == 1 for c in wgmma)
    for c in wgmma:
        assert FAMILIES["wgmma"].check(c.params, shape, GPU) is None
        assert c.params == FAMILIES["wgmma"].repair(c.params)


def test_small_space_is_exhausted_without_repeats():
    shape = Shape(256, 256, 256)
    tiny = timed(
        "mma_ms",
        shape,
        BM=(64,),
        BN=(64, 128),
        BK=(32,),
        WARPS_M=(2,),
        WARPS_N=(2,),
        STAGES=(2, 3),
        RASTER=(1, 8),
    )
    p = TemplateProposer({"mma_ms": tiny}, seed=0)
    proposed, _ = drive(p, StandinEvaluator(), shape, rounds=20, n=3)
    keys = [config_key(c.family, c.params) for c in proposed]
    assert len(keys) == len(set(keys)) == 8  # the whole 1x2x1x1x1x2x2 space, once each
    assert p.exhausted
    assert p.propose(ctx(shape), 3) == []


def test_check_rejections_are_never_proposed():
    shape = Shape(96, 96, 4096)  # BM or BN above 96 waste most of a tile; the family still allows them
    p = TemplateProposer({"small": FAMILIES["small"], "mma_splitk": FAMILIES["mma_splitk"]}, seed=5)
    proposed, _ = drive(p, StandinEvaluator(), shape, rounds=6)
    assert len(proposed) >= 40
    for c in proposed:
        assert FAMILIES[c.family].check(c.params, shape, GPU) is None


def test_converges_near_the_hidden_optimum():
    shape = Shape(1536, 1024, 4096)
    fam = timed("mma_ms", shape)
    # The optimum of the hidden cost over every valid configuration (exhaustive, for the test only).
    import itertools

    names = sorted(fam.space)
    valid = []
    for values in itertools.product(*(fam.space[n] for n in names)):
        params = dict(zip(names, values))
        if fam.check(params, shape, GPU) is None:
            valid.append(fam.truth(params, shape))
    optimum = min(valid)
    # random search with the same budget, averaged over draws
    random_best = sum(min(random.Random(i).sample(valid, 96)) for i in range(20)) / 20

    found = []
    for seed in range(3):
        p = TemplateProposer({"mma_ms": fam}, seed=seed)
        proposed, results = drive(p, StandinEvaluator(), shape, rounds=12)
        assert len(proposed) <= 96 < len(valid) / 10  # searched well under a tenth of the space
        found.append(min(fam.truth(c.params, shape) for c, r in results if r.ok))
    assert max(found) <= optimum * 1.15
    assert sum(found) / len(found) <= optimum * 1.10
    assert sum(found) / len(found) < random_best


def test_stagnation_sets_exhausted():
    shape = Shape(512, 512, 512)
    fam = timed("mma_ms", shape)
    p = TemplateProposer({"mma_ms": fam}, seed=2, patience=2)
    drive(p, StandinEvaluator(), shape, rounds=200)
    assert p.exhausted
    assert p.stale >= 2 or not p._pool(ctx(shape))


def test_archive_attempts_are_skipped_and_seed_the_search():
    from hgemm.archive import Archive

    shape = Shape(1024, 512, 2048)
    archive = Archive()
    evaluator = StandinEvaluator()
    first = TemplateProposer(seed=4)
    proposed1, results1 = drive(first, evaluator, shape, rounds=2, archive=archive)
    assert len(archive.attempts(shape, gpu=GPU.name)) == len(proposed1)

    second = TemplateProposer(seed=4)  # a new run, same seed: would repeat itself without the archive
    proposed2, _ = drive(second, evaluator, shape, rounds=2, archive=archive)
    assert proposed2
    assert not {c.hash for c in proposed1} & {c.hash for c in proposed2}
    archived_ok = {c.hash for c, r in results1 if r.ok}
    assert any(set(c.parents) & archived_ok for c in proposed2), "archived winners are grown from"
    archive.close()



@dataclasses.dataclass
class Revised(Timed):
    """A timed family whose template carries a revision line: a new revision renders new sources."""

    revision: str = "r1"

    def render(self, params):
        return f"// revision {self.revision}\n" + super().render(params)


def revised_families(revision, shape):
    """The mma_ms family as revision `revision` of its template, timed by the stand-in on `shape`."""
    inner = FAMILIES["mma_ms"]
    fam = Revised(name="mma_ms", template=inner.template, space=inner.space, min_cc=inner.min_cc, tuning=inner.tuning,
                  revision=revision)
    fam.inner, fam.shape = inner, shape
    return {"mma_ms": fam}


def test_configurations_measured_with_an_older_template_are_measured_again():
    from hgemm.archive import Archive

    shape = Shape(2048, 1024, 1024)

    def families(revision):
        return revised_families(revision, shape)

    archive = Archive()
    evaluator = StandinEvaluator()
    _, old = drive(TemplateProposer(families("r1"), seed=5), evaluator, shape, rounds=2, archive=archive)
    # fastest first, ties in the proposer's order (its configuration key), one of each structure first
    by_time = sorted(((r.median_us("offline"), c.hash, c.params) for c, r in old if r.ok),
                     key=lambda t: (t[0], repr(tuple(sorted(t[2].items())))))  # fmt: skip
    structure = FAMILIES["mma_ms"].structure
    by_time = [t for i, t in enumerate(by_time) if structure(t[2]) not in {structure(u[2]) for u in by_time[:i]}]

    renewed = TemplateProposer(families("r2"), seed=5, refresh=2)
    proposed, _ = drive(renewed, evaluator, shape, rounds=1, archive=archive)
    first_two = proposed[:2]
    assert [c.params for c in first_two] == [p for _, _, p in by_time[:2]], "the two fastest structures, fastest first"
    assert [c.parents for c in first_two] == [[h] for _, h, _ in by_time[:2]], "each names its older source"
    assert all(c.source.startswith("// revision r2") for c in proposed)
    assert not {config_key("mma_ms", c.params) for c in proposed[2:]} & {
        config_key("mma_ms", c.params) for c in first_two
    }

    again = TemplateProposer(families("r2"), seed=5, refresh=2)  # both now archived as they render
    proposed_again, _ = drive(again, evaluator, shape, rounds=1, archive=archive)
    assert not {c.hash for c in proposed_again} & {c.hash for c in proposed}
    assert not {config_key("mma_ms", c.params) for c in proposed_again} & {
        config_key("mma_ms", c.params) for c in first_two
    }, "a configuration re-measured as it renders now is not measured a third time"

    never = TemplateProposer(families("r3"), seed=5, refresh=0)  # refresh=0: a changed template alone re-measures nothing
    assert not [c for c in never.propose(ctx(shape, archive=archive), 8) if c.note.startswith("refresh")]
    archive.close()


def test_attempts_measured_before_measured_after_are_measured_again_not_skipped():
    """A sweep with --measured-after ranks only figures measured after it. Its proposer must not skip the
    kernels archived before it (they could then never be ranked): the fastest of them come first, re-measured."""
    from hgemm.archive import Archive

    shape = Shape(2048, 1024, 1024)
    families = revised_families("r1", shape)
    archive = Archive()
    evaluator = StandinEvaluator()
    _, old = drive(TemplateProposer(families, seed=5), evaluator, shape, rounds=2, archive=archive)
    # fastest first, ties in the proposer's order (its configuration key), one of each structure first
    by_time = sorted(((r.median_us("offline"), c.hash, c.params) for c, r in old if r.ok),
                     key=lambda t: (t[0], repr(tuple(sorted(t[2].items())))))  # fmt: skip
    structure = FAMILIES["mma_ms"].structure
    by_time = [t for i, t in enumerate(by_time) if structure(t[2]) not in {structure(u[2]) for u in by_time[:i]}]
    cutoff = max(r.created for _, r in old)
    while utc_now() <= cutoff:  # record times are to the second: what follows is measured after the cutoff
        time.sleep(0.05)

    skipping = TemplateProposer(families, seed=5).propose(ctx(shape, archive=archive), 8)
    assert not {c.hash for c in skipping} & {c.hash for c, _ in old}, "without a cutoff every attempt counts"

    after = TemplateProposer(families, seed=5, refresh=2, measured_after=cutoff)
    proposed, _ = drive(after, evaluator, shape, rounds=1, archive=archive)
    assert [c.hash for c in proposed[:2]] == [h for _, h, _ in by_time[:2]], "the two fastest, fastest first"
    assert all(c.note.startswith("remeasure") for c in proposed[:2])
    assert not [c for c in proposed[2:] if c.note.startswith("remeasure")]

    # measured again after the cutoff, they count as this search's own attempts: skipped, not a third time
    again = TemplateProposer(families, seed=5, refresh=2, measured_after=cutoff).propose(ctx(shape, archive=archive), 8)
    assert not {c.hash for c in again} & {c.hash for c in proposed}
    archive.close()


def test_through_the_search_loop():
    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive

    shape = Shape(2048, 1024, 1024)
    archive = Archive()
    result = optimize(
        shape,
        proposers=[TemplateProposer(seed=0)],
        evaluator=StandinEvaluator(),
        archive=archive,
        budget=Budget(evals=40),
        progress=False,
    )
    assert result.best is not None and result.best.proposer == "template"
    assert result.duplicates == 0
    assert result.evals <= 40 and result.quick >= 24
    assert math.isfinite(result.best_record.median_us("offline"))
    assert kernel_hash(result.best.source) == result.best.hash
    archive.close()


@pytest.mark.parametrize("shape", [Shape(64, 64, 64), Shape(512, 128, 8192), Shape(4096, 4096, 4096)])
def test_first_choice_follows_the_model(shape):
    p = TemplateProposer(seed=0, explore=0.0)
    cands = p.propose(ctx(shape), 12)
    times = [predict_us(FAMILIES[c.family], c.params, shape, GPU) for c in cands]
    assert all(math.isfinite(t) for t in times)
    # each family's default and one best-ranked representative per family lead; the rest is in model order
    defaults = sum(1 for c in cands if c.note.startswith("default"))
    assert defaults >= 1
    head = defaults + len({c.family for c in cands})
    assert times[head:] == sorted(times[head:])


def test_nearest_archived_shapes_seed_the_first_batch(monkeypatch):
    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    monkeypatch.setenv("HGEMM_EMBEDDER", "none")  # the real index, by shape features only
    archive = Archive()
    retriever = Retriever(archive, gpu_sm_count=GPU.sm_count)
    done = optimize(
        Shape(2048, 2048, 2048),
        proposers=[TemplateProposer(seed=1)],
        evaluator=StandinEvaluator(),
        archive=archive,
        retriever=retriever,
        budget=Budget(evals=20),
        progress=False,
    )
    assert done.best is not None
    winner = archive.best(Shape(2048, 2048, 2048), gpu=GPU.name)
    near = ctx(Shape(2048, 2048, 4096), archive=archive, retriever=retriever)
    cands = TemplateProposer(seed=1).propose(near, 8)
    seeded = [c for c in cands if c.note.startswith("retrieved")]
    assert seeded and seeded[0].parents == [winner["kernel"]]
    assert seeded[0].family == winner["family"] and seeded[0].params == winner["params"]
    archive.close()


def test_a_gpu_without_history_is_seeded_from_another_gpus_winners(monkeypatch):
    import dataclasses

    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    monkeypatch.setenv("HGEMM_EMBEDDER", "none")
    archive = Archive()
    retriever = Retriever(archive, gpu_sm_count=GPU.sm_count)
    optimize(Shape(2048, 2048, 2048), proposers=[TemplateProposer(seed=1)], evaluator=StandinEvaluator(), archive=archive,
             retriever=retriever, budget=Budget(evals=20), progress=False)
    winner = archive.best(Shape(2048, 2048, 2048), gpu=GPU.name)
    sibling = dataclasses.replace(GPU, name=GPU.name + " (sibling)")

    def first_batch(proposer):
        cands = proposer.propose(ProposalContext(Shape(2048, 2048, 2048), sibling, archive=archive, retriever=retriever), 8)
        return [c for c in cands if c.note.startswith("retrieved")]

    seeded = first_batch(TemplateProposer(seed=1))
    assert seeded and seeded[0].parents == [winner["kernel"]] and seeded[0].params == winner["params"]
    assert first_batch(TemplateProposer(seed=1, other_gpus=False)) == []
    # the sibling's own history of other shapes does not hide another GPU's winner of a nearer shape
    own = StandinEvaluator(gpu=sibling)
    optimize(Shape(1024, 1024, 1024), proposers=[TemplateProposer(seed=2)], evaluator=own, archive=archive,
             retriever=retriever, budget=Budget(evals=6), progress=False)
    retriever.sync()

    def hits():
        c = ProposalContext(Shape(2048, 2048, 2048), sibling, archive=archive, retriever=retriever)
        return [(h["M"], h["gpu"]) for h in TemplateProposer(seed=1)._retrieve(c)]

    assert hits()[:2] == [(2048, GPU.name), (1024, sibling.name)]
    assert first_batch(TemplateProposer(seed=1))[0].params == winner["params"]
    # once the sibling has measured the shape itself, its own winner comes first, the other GPU's next
    optimize(Shape(2048, 2048, 2048), proposers=[TemplateProposer(seed=3)], evaluator=own, archive=archive,
             retriever=retriever, budget=Budget(evals=6), progress=False)
    retriever.sync()
    assert hits()[:3] == [(2048, sibling.name), (2048, GPU.name), (1024, sibling.name)]
    archive.close()


def test_the_nearest_shapes_winner_leads_the_first_batch(monkeypatch):
    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    monkeypatch.setenv("HGEMM_EMBEDDER", "none")
    archive = Archive()
    retriever = Retriever(archive, gpu_sm_count=GPU.sm_count)
    for shape in [(4096, 4096, 4096), (1024, 1024, 256), (256, 256, 8192), (64, 8192, 64)]:
        optimize(Shape(*shape), proposers=[TemplateProposer(seed=1)], evaluator=StandinEvaluator(), archive=archive,
                 retriever=retriever, budget=Budget(evals=10), progress=False)
    retriever.sync()
    query = Shape(4096, 4096, 8192)
    nearest = retriever.similar_shapes(query, gpu=GPU.name, k=5)[0]
    assert (nearest["M"], nearest["N"], nearest["K"]) == (4096, 4096, 4096)
    cands = TemplateProposer(seed=1).propose(ctx(query, archive=archive, retriever=retriever), 8)
    assert cands[0].note.startswith("retrieved") and cands[0].params == nearest["params"]
    # then the model's favourite of the other retrieved winners (those that differ from the nearest one and that
    # the query's shape accepts: a split-K winner of a small output may need more workspace than the contract's)
    hits = retriever.similar_shapes(query, gpu=GPU.name, k=5)
    distinct = {tuple(sorted(h["params"].items())) for h in hits if FAMILIES[h["family"]].check(h["params"], query) is None}
    assert sum(c.note.startswith("retrieved") for c in cands[:2]) == min(2, len(distinct))
    archive.close()


class _Hits:
    """A retriever that returns fixed hits."""

    def __init__(self, hits):
        self.hits = hits

    def similar_shapes(self, shape, gpu=None, k=5):
        return self.hits[:k]


def test_a_winner_archived_before_warp_producer_is_proposed_with_it_first():
    """A retrieved wgmma winner that predates `warp_producer` ran the one-thread loop; where the defaults take the
    warp (no cluster) the first batch proposes it with the warp first, then as it ran. One that names its
    producer, or has a cluster, is proposed once, as it is."""
    wgmma = FAMILIES["wgmma"]
    near = Shape(64, 4096, 2048)
    old = {k: v for k, v in wgmma.default_params(near, GPU).items() if k != "warp_producer"}
    assert old["cluster_m"] == 1
    hit = {"kernel_hash": "a" * 16, "family": "wgmma", "params": old, "M": 64, "N": 4096, "K": 2048,
           "gpu": GPU.name, "distance": 1.0}  # fmt: skip
    cands = TemplateProposer(seed=1).propose(ctx(Shape(64, 4096, 4096), retriever=_Hits([hit])), 8)
    seeded = [c for c in cands if c.note.startswith("retrieved")]
    assert [c.params["warp_producer"] for c in seeded] == [1, 0]
    assert seeded[0] is cands[0] and all(c.parents == ["a" * 16] for c in seeded)
    assert {k: v for k, v in seeded[0].params.items() if k != "warp_producer"} == \
        {k: v for k, v in seeded[1].params.items() if k != "warp_producer"}  # fmt: skip
    for named in ({**old, "warp_producer": 0}, {**old, "cluster_m": 2}):
        hit2 = {**hit, "params": named}
        cands = TemplateProposer(seed=1).propose(ctx(Shape(64, 4096, 4096), retriever=_Hits([hit2])), 8)
        seeded = [c for c in cands if c.note.startswith("retrieved")]
        assert [c.params["warp_producer"] for c in seeded] == [0]


def test_a_resumed_search_still_tries_another_gpus_winner_first(monkeypatch):
    import dataclasses

    from hgemm.agent.loop import Budget, optimize
    from hgemm.archive import Archive
    from hgemm.index import Retriever

    monkeypatch.setenv("HGEMM_EMBEDDER", "none")
    archive = Archive()
    retriever = Retriever(archive, gpu_sm_count=GPU.sm_count)
    shape = Shape(4096, 1024, 2048)
    optimize(shape, proposers=[TemplateProposer(seed=1)], evaluator=StandinEvaluator(), archive=archive,
             retriever=retriever, budget=Budget(evals=24), progress=False)
    winner = archive.best(shape, gpu=GPU.name)
    sibling = dataclasses.replace(GPU, name=GPU.name + " (sibling)")
    optimize(shape, proposers=[TemplateProposer(seed=1, other_gpus=False)], evaluator=StandinEvaluator(gpu=sibling),
             archive=archive, retriever=retriever, budget=Budget(evals=3), progress=False)
    tried = [row["params"] for row in archive.attempts(shape, gpu=sibling.name)]
    assert tried and winner["params"] not in tried
    retriever.sync()
    c = ProposalContext(shape, sibling, archive=archive, retriever=retriever)
    first = TemplateProposer(seed=1).propose(c, 8)[0]
    assert first.note.startswith("retrieved") and first.params == winner["params"]
    archive.close()


def test_on_large_shapes_the_first_batch_skips_families_the_model_gives_no_chance():
    from hgemm.agent.template import FAMILY_REACH

    shape = Shape(8192, 8192, 8192)
    p = TemplateProposer(seed=1)
    cands = p.propose(ctx(shape), 8)
    times = {c.family: predict_us(FAMILIES[c.family], c.params, shape, GPU) for c in cands}
    best = min(times.values())
    far = {name for name in takers(shape)
           if predict_us(FAMILIES[name], FAMILIES[name].default_params(shape, GPU), shape, GPU) > FAMILY_REACH * best}
    assert far, "some family should be hopeless on 8192^3"
    head = [c.family for c in cands[:4]]
    assert not far & set(head)


def test_refresh_within_widens_which_outdated_configurations_are_measured_again():
    from hgemm.archive import Archive

    shape = Shape(2048, 1024, 1024)

    def families(revision):
        return revised_families(revision, shape)

    archive = Archive()
    _, old = drive(TemplateProposer(families("r1"), seed=5), StandinEvaluator(), shape, rounds=2, archive=archive)
    times = sorted(r.median_us("offline") for _, r in old if r.ok)
    best = times[0]

    def refreshed(within):
        p = TemplateProposer(families("r2"), seed=5, refresh=8, refresh_within=within)
        return [c for c in p.propose(ctx(shape, archive=archive), 8) if c.note.startswith("refresh")]

    narrow, wide = refreshed(1.0), refreshed(10.0)
    assert len(narrow) == sum(t <= best for t in times) >= 1, "1.0: only the best time itself"
    assert len(wide) == min(8, len(times)) > len(narrow), "a wide factor takes eight"

    # One configuration per structure first (tuning parameters aside), fastest first within each.
    fam = families("r2")["mma_ms"]
    by_time = sorted((r.median_us("offline"), fam.structure(c.params)) for c, r in old if r.ok)
    firsts = list(dict.fromkeys(s for _, s in by_time))
    assert len(firsts) < len(by_time), "the data must hold configurations of the same structure"
    taken = [fam.structure(c.params) for c in wide]
    k = min(len(taken), len(firsts))
    assert taken[:k] == firsts[:k]
    with pytest.raises(ValueError, match="refresh_within"):
        TemplateProposer(families("r2"), refresh_within=0.9)
    archive.close()


def test_the_models_favourite_is_proposed_when_it_is_far_from_every_seed():
    # 512 x 1024 x 8192: the model's favourite structure (128x128 tiles, 2x1 cluster, K split in four through
    # the workspace) is at least three single-parameter moves from the family's default (64x64 pairs, unsplit).
    # It is in the first batch, marked "model".
    shape = Shape(512, 1024, 8192)
    fam = FAMILIES["wgmma"]
    favourite = {"bm": 128, "bn": 128, "cluster_m": 2, "split_k": 4, "split_dsmem": 0}

    def model(family, params, shape_, gpu):
        base = predict_us(family, params, shape_, gpu)
        return base / 10 if all(params[k] == v for k, v in favourite.items()) else base

    default = fam.default_params(shape, GPU)
    assert sum(default[k] != v for k, v in favourite.items()) >= 3
    p = TemplateProposer({"wgmma": fam}, seed=0, explore=0.0, random_samples=0, model=model)
    first = p.propose(ctx(shape), 8)
    hits = [c for c in first if all(c.params[k] == v for k, v in favourite.items())]
    assert hits and hits[0].note.startswith("model;")
    assert fam.check(hits[0].params, shape, GPU) is None
    # Without the model's favourites the first batch does not reach it.
    q = TemplateProposer({"wgmma": fam}, seed=0, explore=0.0, random_samples=0, model=model, model_seeds=0)
    assert not [c for c in q.propose(ctx(shape), 8) if all(c.params[k] == v for k, v in favourite.items())]


def _measured(cands, times_by_family):
    """Records of `cands` at the offline time their family is given (the stand-in's way of building them)."""
    from hgemm.core.record import EvalRecord, ModeResult, Stats

    out = []
    for c in cands:
        rec = EvalRecord(kernel_hash=c.hash, M=1, N=1, K=1, gpu=GPU.name, stage="quick")
        rec.compiled = rec.correct = True
        t = times_by_family[c.family]
        rec.modes["offline"] = ModeResult("offline", Stats(median_us=t, p10_us=t, p90_us=t, n=7), {}, floor_us=0.1)
        out.append((c, rec))
    return out


@pytest.mark.parametrize("slower, given_up", [(2.5, True), (1.5, False)])
def test_a_family_measured_twice_as_slow_as_the_best_gets_no_more_evaluations(slower, given_up):
    from hgemm.agent.template import FAMILY_GIVE_UP

    shape = Shape(8192, 8192, 4096)
    assert (slower >= FAMILY_GIVE_UP) == given_up
    later_mma = 0
    for seed in range(4):  # the searches' random exploration differs from seed to seed
        p = TemplateProposer(seed=seed)
        first = p.propose(ctx(shape), 8)
        families = {c.family for c in first}
        assert {"wgmma", "mma_ms"} <= families, "the first batch tries both families on this shape"
        times = {f: 1000.0 for f in families} | {"mma_ms": 1000.0 * slower}
        p.observe(_measured(first, times))
        later = [c for _ in range(4) for c in p.propose(ctx(shape), 8)]
        assert later
        later_mma += sum(c.family == "mma_ms" for c in later)
        if given_up:
            assert all(not (set(c.parents) & {f.hash for f in first if f.family == "mma_ms"}) for c in later)
    # given up, it gets no proposal in any search; still in the running, its neighbours are measured in some
    assert (later_mma == 0) == given_up


def _archive_with_mma_behind(shapes, factor):
    """A real archive where, on each of `shapes`, wgmma was fastest, mma_ms measured `factor` times its time and any
    other family proposed there 1.1 times (a tie would let the order of names pick the winner)."""
    from hgemm.archive import Archive

    archive = Archive()
    for shape in shapes:
        p = TemplateProposer(seed=5)
        cands = p.propose(ctx(shape), 8)
        assert {"wgmma", "mma_ms"} <= {c.family for c in cands}
        for c, rec in _measured(cands, {f: 110.0 for f in FAMILIES} | {"wgmma": 100.0, "mma_ms": 100.0 * factor}):
            rec.M, rec.N, rec.K = shape
            archive.record(c, rec)
    return archive


class _Near:
    """A retriever that knows the archive's shapes, nearest by log distance."""

    def __init__(self, archive, shapes):
        self.archive, self.shapes = archive, shapes

    def similar_shapes(self, shape, gpu=None, k=5):
        def dist(s):
            return sum(abs(math.log2(a / b)) for a, b in zip(s, shape, strict=True))

        out = []
        for s in sorted(self.shapes, key=dist)[:k]:
            best = min(self.archive.attempts(s, gpu=GPU.name), key=lambda row: row["offline_us"])
            out.append({"kernel_hash": best["kernel"], "family": best["family"], "params": best["params"],
                        "M": s.M, "N": s.N, "K": s.K, "gpu": GPU.name, "distance": dist(s)})  # fmt: skip
        return out


@pytest.mark.parametrize("factor, ruled_out", [(2.5, True), (1.3, True), (1.2, False)])
def test_a_family_that_lost_on_each_of_the_nearest_shapes_is_not_tried(factor, ruled_out):
    from hgemm.agent.template import NEARBY_BEHIND, NEARBY_EVIDENCE

    assert (factor >= NEARBY_BEHIND) == ruled_out

    near = [Shape(8192, 8192, 4096), Shape(8192, 8192, 2048), Shape(4096, 8192, 4096)][:NEARBY_EVIDENCE]
    archive = _archive_with_mma_behind(near, factor)
    c = ctx(Shape(8192, 4096, 4096), archive=archive, retriever=_Near(archive, near))
    p = TemplateProposer(seed=6)
    families = {cand.family for _ in range(3) for cand in p.propose(c, 8)}
    assert ("mma_ms" not in families) == ruled_out and "wgmma" in families
    archive.close()


class _AlignedOnly(type(FAMILIES["wgmma"])):
    """wgmma as it was before `pad_rows`: no rows that TMA cannot read in place."""

    def check(self, params, shape, gpu=None):
        return "K must be a multiple of 8" if shape.K % 8 else super().check(params, shape, gpu)


def test_the_nearest_shapes_never_rule_out_the_only_family_that_can_run_a_shape():
    near = [Shape(8192, 8192, 4096), Shape(8192, 8192, 2048), Shape(4096, 8192, 4096)]
    archive = _archive_with_mma_behind(near, 3.0)
    odd = Shape(4095, 4097, 999)  # the winner nearby cannot run it, mma_ms can
    wgmma = FAMILIES["wgmma"]
    fields = {f.name: getattr(wgmma, f.name) for f in dataclasses.fields(wgmma)}
    families = {**FAMILIES, "wgmma": _AlignedOnly(**fields)}
    p = TemplateProposer(families, seed=6)
    cands = p.propose(ctx(odd, archive=archive, retriever=_Near(archive, near)), 8)
    assert cands and "mma_ms" in {cand.family for cand in cands}
    archive.close()
