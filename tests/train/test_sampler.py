"""PackedBatchSampler: shards, equal step counts, epochs, exact mid-epoch resume, real gloo ranks."""
from __future__ import annotations

import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

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


def _worker(rank, world, port, out_dir):
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world, timeout=__import__("datetime").timedelta(seconds=60))
    try:
        s = PackedBatchSampler(_lengths(301), 1024, seed=11)  # rank and world size from torch.distributed
        assert (s.rank, s.num_replicas) == (rank, world)
        s.set_epoch(2)
        mine = [i for b in s for i in b]
        steps = torch.tensor([len(s)])
        all_steps = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(all_steps, steps)
        sizes = [torch.zeros(1, dtype=torch.int64) for _ in range(world)]
        dist.all_gather(sizes, torch.tensor([len(mine)]))
        padded = torch.full((int(max(sizes)),), -1, dtype=torch.int64)
        padded[: len(mine)] = torch.tensor(mine)
        gathered = [torch.zeros_like(padded) for _ in range(world)]
        dist.all_gather(gathered, padded)
        if rank == 0:
            torch.save({"steps": [int(x) for x in all_steps], "shards": [g[g >= 0].tolist() for g in gathered]},
                       os.path.join(out_dir, "result.pt"))
    finally:
        dist.destroy_process_group()


@pytest.mark.timeout(180)
def test_two_gloo_ranks_get_disjoint_complete_equal_shards(tmp_path):
    ctx = mp.start_processes(_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + 150
    while not ctx.join(timeout=5):  # raises with the worker's traceback if one fails
        if time.monotonic() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail("the gloo workers did not finish within 150 s")
    res = torch.load(tmp_path / "result.pt", weights_only=True)
    assert res["steps"][0] == res["steps"][1] > 0
    a, b = res["shards"]
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(301))
