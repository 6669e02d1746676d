"""torch functions and autograd on tensorclasses and TensorDicts (chatdata.td.tensorclass.torch_functions,
chatdata.td.core.autograd_methods)."""
from __future__ import annotations

import pytest
import torch

from chatdata import TensorDict, tensorclass


@tensorclass
class Node:
    x: torch.Tensor
    label: str
    child: "Node" = None


@tensorclass
class Other:
    x: torch.Tensor
    label: str


def nested(bs=(3, 4)):
    inner = Node(x=torch.randn(*bs, 5), label="inner", batch_size=[*bs, 5])
    return Node(x=torch.randn(*bs), label="outer", child=inner, batch_size=list(bs))


def test_full_like_and_friends_keep_class_and_text():
    n = nested()
    full = torch.full_like(n, 9.0)
    assert type(full) is Node and type(full.child) is Node
    assert (full.x == 9).all() and (full.child.x == 9).all()
    assert full.label == "outer" and full.child.label == "inner"
    assert (torch.zeros_like(n).x == 0).all() and (torch.ones_like(n).child.x == 1).all()
    td = TensorDict(a=torch.ones(2, 3), batch_size=[2])
    assert torch.full_like(td, 2.0)["a"].tolist() == [[2.0] * 3] * 2


@pytest.mark.parametrize("from_torch", [True, False])
def test_gather_along_a_batch_dim_with_nested_batch(from_torch):
    n = nested()
    index = torch.tensor([[0, 2, 2], [1, 1, 0], [3, 0, 1]])
    out = torch.gather(n, dim=-1, index=index) if from_torch else n.gather(dim=-1, index=index)
    assert type(out) is Node and out.batch_size == (3, 3)
    assert out.child.batch_size == (3, 3, 5) and out.child.x.shape == (3, 3, 5)
    assert torch.equal(out.x, torch.gather(n.x, -1, index))
    assert torch.equal(out.child.x[1, 2], n.child.x[1, 0])
    assert out.label == "outer" and out.child.label == "inner"
    target = out.clone().zero_()
    again = torch.gather(n, dim=-1, index=index, out=target) if from_torch else n.gather(-1, index, out=target)
    assert torch.equal(target.x, out.x) and torch.equal(again.x, out.x)


def test_stack_and_cat_refuse_different_classes_clearly():
    n = Node(x=torch.zeros(2), label="a", batch_size=[2])
    o = Other(x=torch.zeros(2), label="a", batch_size=[2])
    for fn in (torch.stack, torch.cat):
        with pytest.raises(TypeError, match=r"no implementation found.*\['Node', 'Other'\]"):
            fn([n, o])
    assert type(torch.stack([n, n])) is Node and torch.cat([n, n]).batch_size == (4,)


def test_requires_grad_grad_data_backward_on_a_tensorclass():
    w = torch.randn(3, requires_grad=True)
    n = Node(x=w * 1, label="l", batch_size=[3])
    assert n.requires_grad
    plus = n + 1
    assert plus.label == "l"
    plus.sum().x.backward()
    assert torch.equal(w.grad, torch.ones(3))
    leaf = Node(x=torch.randn(3, requires_grad=True), label="l", batch_size=[3])
    (leaf.x * 2).sum().backward()
    assert type(leaf.grad) is Node and torch.equal(leaf.grad.x, torch.full((3,), 2.0))
    assert leaf.grad.child is None  # no gradient, no entry
    assert not leaf.data.requires_grad and (leaf == leaf.data).all()


def test_backward_of_scalar_losses():
    @tensorclass
    class Losses:
        actor: torch.Tensor
        critic: torch.Tensor

    x = torch.randn(3, requires_grad=True)
    Losses(actor=x.sum(), critic=x.pow(2).sum(), batch_size=[]).backward()
    assert torch.allclose(x.grad, 1 + 2 * x.detach())


def test_backward_bad_input_is_explained():
    with pytest.raises(RuntimeError, match="empty batch size"):
        TensorDict(a=torch.ones(2, requires_grad=True), batch_size=[2]).backward()
    with pytest.raises(RuntimeError, match="no entry requires a gradient"):
        TensorDict(a=torch.ones(())).backward()


def test_autograd_grad_with_collections():
    a = Node(x=torch.randn(3, requires_grad=True), label="s", batch_size=[3])
    b = a * 3
    grads = torch.autograd.grad(b.select("x"), a.select("x"), torch.ones_like(b.select("x")))
    assert type(grads) is Node and torch.equal(grads.x, torch.full((3,), 3.0))
    td_in = TensorDict(p=torch.ones(2, requires_grad=True))
    td_out = TensorDict(q=td_in["p"] ** 2)
    g = torch.autograd.grad(td_out, td_in, TensorDict(q=torch.ones(2)))
    assert g["p"].tolist() == [2.0, 2.0]
    with pytest.raises(KeyError, match="grad_outputs has no entry"):
        torch.autograd.grad(td_out, td_in, TensorDict(other=torch.ones(2)))


def test_sum_and_mean_reduce_leaves_or_batch_dims():
    td = TensorDict(a=torch.arange(6.0).reshape(2, 3), b={"c": torch.ones(2, 3)}, batch_size=[2])
    assert td.sum()["a"].item() == 15.0 and td.sum().batch_size == ()
    assert td.sum(0)["a"].tolist() == [3.0, 5.0, 7.0] and td.sum(0)["b", "c"].tolist() == [2.0] * 3
    assert td.sum(0, keepdim=True).batch_size == (1,)
    assert td.sum(reduce=True).item() == 21.0
    assert td.mean(reduce=True).item() == pytest.approx(21.0 / 12)
    with pytest.raises(IndexError):
        td.sum(2)


@pytest.mark.parametrize("dim", [0, 1, -1, -2])
def test_all_any_along_a_dim_keep_the_class_and_nested_batches(dim):
    inner = Node(torch.zeros(3, 1), "z", batch_size=[3, 1])
    n = Node(torch.zeros(3, 1), "z", inner, batch_size=[3, 1])
    assert n.all() is False and n.any() is False
    red = n.all(dim=dim)
    assert type(red) is Node and type(red.child) is Node and red.child.label == "z"
    assert not red.all() and not n.any(dim=dim).any()
    ones = n.apply(lambda t: t.fill_(1.0))
    assert ones.all() is True and ones.all(dim=dim).all()


def test_logic_and_reflected_operators():
    @tensorclass
    class Flags:
        x: torch.Tensor

    f = Flags(torch.randn(10))
    b = f.bool()
    for r in (b ^ True, True ^ b, b | False, False | b, b & False, False & b):
        assert type(r) is Flags and r.x.dtype == torch.bool
    assert torch.equal((True ^ b).x, ~b.x) and not (False & b).x.any()
    assert type(abs(f)) is Flags and type(1 + f) is Flags
