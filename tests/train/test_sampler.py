"""PackedBatchSampler: shards, equal step counts, epochs, exact mid-epoch resume, real gloo ranks."""
from __future__ import annotations

import itertools
import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp
from hypothesis import given, settings
from hypothesis import strategies as st

from chatdata.train import PackedBatchSampler


def _lengths(n=500, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 900, (n,), generator=g)


@pytest.mark.parametrize("n, replicas", [(500, 1), (500, 3), (37, 4), (5, 2)])
def test_shards_disjoint_complete_equal(n, replicas):
    lengths = _lengths(n)
    shards = [list(PackedBatchSampler(lengths, 1024, seed=7, num_replicas=replicas, rank=r)) for r in range(replicas)]
    assert len({len(s) for s in shards}) == 1                              # same number of steps on every rank
    seen = [i for s in shards for b in s for i in b]
    assert sorted(seen) == list(range(n))                                  # disjoint and complete
    assert all(int(lengths[b].sum()) <= 1024 for s in shards for b in s)


def test_drop_last_gives_equal_counts_and_disjoint_shards():
    lengths = _lengths(200)
    shards = [list(PackedBatchSampler(lengths, 1024, num_replicas=3, rank=r, drop_last=True)) for r in range(3)]
    assert len({len(s) for s in shards}) == 1
    seen = [i for s in shards for b in s for i in b]
    assert len(seen) == len(set(seen))


def test_single_sequence_bins_are_repeated_only_when_unavoidable():
    lengths = torch.full((3,), 100)  # every bin holds one sequence; 3 bins for 2 ranks
    shards = [list(PackedBatchSampler(lengths, 100, num_replicas=2, rank=r)) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == 2
    assert set(i for s in shards for b in s for i in b) == {0, 1, 2}


def test_set_epoch_reshuffles_deterministically():
    lengths = _lengths()
    a, b = PackedBatchSampler(lengths, 2048, seed=1), PackedBatchSampler(lengths, 2048, seed=1)
    e0 = list(a)
    a.set_epoch(1)
    b.set_epoch(1)
    e1 = list(a)
    assert e1 == list(b) and e1 != e0
    assert list(PackedBatchSampler(lengths, 2048, shuffle=False)) == list(PackedBatchSampler(lengths, 2048, shuffle=False))


def test_resume_mid_epoch_exactly(tmp_path):
    lengths = _lengths()
    s = PackedBatchSampler(lengths, 2048, seed=5, num_replicas=2, rank=1)
    s.set_epoch(3)
    it = iter(s)
    head = [next(it) for _ in range(4)]
    torch.save(s.state_dict(), tmp_path / "sampler.pt")
    rest = list(it)
    fresh = PackedBatchSampler(lengths, 2048, seed=5, num_replicas=2, rank=1)
    fresh.load_state_dict(torch.load(tmp_path / "sampler.pt", weights_only=True))
    assert list(fresh) == rest and head + rest == list(fresh)  # then the next pass is the whole epoch again
    with pytest.raises(ValueError, match="seed=5"):
        PackedBatchSampler(lengths, 2048, seed=6, num_replicas=2, rank=1).load_state_dict(s.state_dict())


def test_resume_through_a_dataloader():
    from chatdata.train import collate_padding_free

    lengths = _lengths(120)
    data = [{"input_ids": torch.arange(int(n))} for n in lengths]
    s = PackedBatchSampler(lengths, 2048, seed=2)
    loader = torch.utils.data.DataLoader(data, batch_sampler=s, collate_fn=collate_padding_free)
    it = iter(loader)
    for _ in range(3):
        next(it)
    state = s.state_dict()
    rest = [b["input_ids"] for b in it]
    s2 = PackedBatchSampler(lengths, 2048, seed=2)
    s2.load_state_dict(state)
    again = [b["input_ids"] for b in torch.utils.data.DataLoader(data, batch_sampler=s2, collate_fn=collate_padding_free)]
    assert len(again) == len(rest) and all(torch.equal(x, y) for x, y in zip(again, rest))


def _take(lengths, R, cut, state=None, epoch=0, **kw):
    """Every rank of a world of ``R``: its first ``cut`` batches of ``epoch`` (after loading
    ``state``), its rest, and rank 0's state after the cut."""
    heads, rests, after = [], [], None
    for r in range(R):
        s = PackedBatchSampler(lengths, 40, num_replicas=R, rank=r, **kw)
        s.set_epoch(epoch)
        if state is not None:
            s.load_state_dict(state)
        it = iter(s)
        heads.append(list(itertools.islice(it, cut)))  # (len(s) counts the whole epoch, also when resumed)
        after = s.state_dict() if r == 0 else after
        rests.append(list(it))
    return heads, rests, after


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), min_size=1, max_size=50), sizes=st.lists(st.integers(1, 4), min_size=2, max_size=3),
       cuts=st.lists(st.integers(0, 12), min_size=2, max_size=2), drop_last=st.booleans(), seed=st.integers(0, 3))
def test_resume_on_another_world_size_takes_every_bin_not_taken_yet(lengths, sizes, cuts, drop_last, seed):
    """An elastic restart: ranks of a first world size take some batches, then the ranks of
    another take the rest of that epoch (and a third, or the same again, after them). Together
    they take every sequence (with drop_last, none twice); a sequence comes twice only from a bin
    of one sequence repeated to make the bins divide, as DistributedSampler pads; every rank of a
    world takes as many batches; the next epoch is the new world size's own."""
    lengths = torch.tensor(lengths)
    kw = dict(seed=seed, drop_last=drop_last)
    try:
        for R in sizes:
            PackedBatchSampler(lengths, 40, num_replicas=R, rank=0, **kw)
    except ValueError as err:  # drop_last with fewer bins than ranks: refused up front
        assert "drop_last=True" in str(err)
        return
    state, taken = None, []
    for R, cut in zip(sizes, cuts[:len(sizes) - 1] + [10 ** 6]):  # the last world takes the rest
        heads, rests, after = _take(lengths, R, cut, state, epoch=1, **kw)
        assert len({len(h) + len(t) for h, t in zip(heads, rests)}) == 1  # equal steps on every rank
        if state is not None:  # the same state resumed on the same world size: the same rest
            again, _, _ = _take(lengths, R, 10 ** 6, after, epoch=1, **kw)
            assert again == rests
        taken += [b for h in heads for b in h]
        state = after
    seen = [i for b in taken for i in b]
    if drop_last:
        assert len(seen) == len(set(seen))
    else:
        assert set(seen) == set(range(len(lengths)))
        for i in {i for i in seen if seen.count(i) > 1}:
            assert any(b == [i] for b in taken), i
    # the next epoch is dealt for the last world size alone
    last = PackedBatchSampler(lengths, 40, num_replicas=sizes[-1], rank=0, **kw)
    last.set_epoch(1)
    last.load_state_dict(state)
    last.set_epoch(2)
    fresh = PackedBatchSampler(lengths, 40, num_replicas=sizes[-1], rank=0, **kw)
    fresh.set_epoch(2)
    assert list(last) == list(fresh) and "carry" not in last.state_dict()


def test_a_state_at_an_epoch_boundary_resumes_the_next_epoch_whole(tmp_path):
    """A checkpoint after the last batch of an epoch (the usual one): resuming it yields nothing
    more of that epoch, on the same or another world size, and set_epoch(next) the whole next one."""
    lengths = _lengths(200)
    s = PackedBatchSampler(lengths, 1024, seed=4, num_replicas=2, rank=1)
    s.set_epoch(3)
    list(s)
    torch.save(s.state_dict(), tmp_path / "end.pt")
    for R in (2, 3):
        r = PackedBatchSampler(lengths, 1024, seed=4, num_replicas=R, rank=0)
        r.load_state_dict(torch.load(tmp_path / "end.pt", weights_only=True))
        r.set_epoch(3)  # a loop that resumes at the saved epoch calls it again: nothing changes
        assert list(r) == []
        r.set_epoch(4)
        fresh = PackedBatchSampler(lengths, 1024, seed=4, num_replicas=R, rank=0)
        fresh.set_epoch(4)
        assert list(r) == list(fresh) and len(r) == len(fresh) > 0


def test_a_resized_state_is_version_2_and_its_rest_survives_a_save(tmp_path):
    lengths = _lengths(300)
    s = PackedBatchSampler(lengths, 1024, seed=1, num_replicas=4, rank=0)
    it = iter(s)
    for _ in range(5):
        next(it)
    two = PackedBatchSampler(lengths, 1024, seed=1, num_replicas=2, rank=1)
    two.load_state_dict(s.state_dict())
    it = iter(two)
    next(it)
    state = two.state_dict()
    assert (state["version"], state["carry"], state["batches_done"]) == (2, [[4, 5]], 1)
    torch.save(state, tmp_path / "s.pt")
    again = PackedBatchSampler(lengths, 1024, seed=1, num_replicas=2, rank=1)
    again.load_state_dict(torch.load(tmp_path / "s.pt", weights_only=True))
    assert list(again) == list(it)
    assert s.state_dict()["version"] == 1 and "carry" not in s.state_dict()  # read by older chatdata too


@pytest.mark.parametrize("kwargs, err, match", [
    ({"lengths": []}, ValueError, "no lengths"),
    ({"lengths": torch.tensor([1.0])}, TypeError, "float32"),
    ({"max_tokens": 0}, ValueError, "max_tokens must be > 0"),
    ({"rank": 2, "num_replicas": 2}, ValueError, r"rank must be in \[0, 1\]"),
    ({"num_replicas": 0}, ValueError, "num_replicas must be > 0"),
    ({"overflow": "split"}, ValueError, "max_length"),
    ({"lengths": torch.tensor([5, 3000])}, ValueError, "sequence 1 has 3000 tokens"),
])
def test_bad_input(kwargs, err, match):
    args = {"lengths": torch.tensor([5, 6]), "max_tokens": 16} | kwargs
    with pytest.raises(err, match=match):
        PackedBatchSampler(**args)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gather_lists(values: list, world: int) -> list:
    """Every rank's list of ints (all_gather of a padded tensor)."""
    import torch.distributed as dist

    sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(sizes, torch.tensor([len(values)]))
    padded = torch.full((int(max(sizes)),), -1, dtype=torch.int64)
    padded[: len(values)] = torch.tensor(values, dtype=torch.int64)
    gathered = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(gathered, padded)
    return [g[g >= 0].tolist() for g in gathered]


def _worker(rank, world, port, out_dir):
    """World of 2: each rank's whole epoch 2; then 3 batches of a second pass and rank 0's state."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=__import__("datetime").timedelta(seconds=60))
    try:
        s = PackedBatchSampler(_lengths(301), 1024, seed=11)  # rank and world size from torch.distributed
        assert (s.rank, s.num_replicas) == (rank, world)
        s.set_epoch(2)
        mine = [i for b in s for i in b]
        steps = [x[0] for x in _gather_lists([len(s)], world)]
        shards = _gather_lists(mine, world)
        again = PackedBatchSampler(_lengths(301), 1024, seed=11)
        again.set_epoch(2)
        head = [i for b in itertools.islice(iter(again), 3) for i in b]
        heads = _gather_lists(head, world)
        if rank == 0:
            torch.save(again.state_dict(), os.path.join(out_dir, "state.pt"))
            torch.save({"steps": steps, "shards": shards, "heads": heads}, os.path.join(out_dir, "result.pt"))
    finally:
        dist.destroy_process_group()


def _resume_worker(rank, world, port, out_dir):
    """Another world size: every rank resumes from the 2-rank state and takes the rest of epoch 2."""
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=__import__("datetime").timedelta(seconds=60))
    try:
        s = PackedBatchSampler(_lengths(301), 1024, seed=11)
        s.set_epoch(2)
        s.load_state_dict(torch.load(os.path.join(out_dir, "state.pt"), weights_only=True))
        rest = [b for b in s]
        steps = [x[0] for x in _gather_lists([len(rest)], world)]
        rests = _gather_lists([i for b in rest for i in b], world)
        if rank == 0:
            torch.save({"steps": steps, "rests": rests}, os.path.join(out_dir, "resumed.pt"))
    finally:
        dist.destroy_process_group()


def _launch(fn, world: int, out_dir) -> None:
    ctx = mp.start_processes(fn, args=(world, _free_port(), str(out_dir)), nprocs=world, join=False, start_method="spawn")
    deadline = time.monotonic() + 150
    while not ctx.join(timeout=5):  # raises with the worker's traceback if one fails
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail("the gloo workers did not finish within 150 s")


@pytest.mark.timeout(300)
def test_two_gloo_ranks_get_disjoint_complete_equal_shards_and_three_resume_them(tmp_path):
    _launch(_worker, 2, tmp_path)
    res = torch.load(tmp_path / "result.pt", weights_only=True)
    assert res["steps"][0] == res["steps"][1] > 0
    a, b = res["shards"]
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(301))
    # an elastic restart: 3 ranks take the rest of the epoch the 2 ranks had begun
    _launch(_resume_worker, 3, tmp_path)
    resumed = torch.load(tmp_path / "resumed.pt", weights_only=True)
    assert len(set(resumed["steps"])) == 1 and resumed["steps"][0] > 0
    taken = [i for h in res["heads"] for i in h] + [i for r in resumed["rests"] for i in r]
    assert sorted(taken) == list(range(301))  # every sequence once: none twice, none lost
