"""Splits emitted as strided slices where FuseOps fuses the slices into their readers, and
priced as what TVM then runs."""

import tvm
from helpers import assert_close, const, module, relax_ops, tensor
from tvm import relax
from tvm.relax import op as R

from tvm_eqsat import cost, graph, tune
from tvm_eqsat.extract import dag_cost
from tvm_eqsat.fusion import fused_slices, splits_to_slices
from tvm_eqsat.transform import _with_blocks


def _split_module(part_reader):
    """x @ w split in three along the columns; part 1 read by ``part_reader(part)``."""
    x = tensor("x", (4, 8))

    def body(bb, x):
        y = bb.emit(R.matmul(x, const((8, 48))))
        parts = bb.emit(R.split(y, [16, 32], axis=1))
        a = bb.emit(R.nn.relu(relax.TupleGetItem(parts, 0)))
        b = bb.emit(part_reader(relax.TupleGetItem(parts, 1)))
        c = bb.emit(R.permute_dims(R.multiply(relax.TupleGetItem(parts, 2), relax.const(2.0, "float32"))))
        return relax.Tuple([a, b, c])

    return module([x], body)


def _graph(mod):
    return graph.graph_from_block(mod["main"].body.blocks[0])


def _rebuilt(mod, g):
    new = mod.clone()
    new["main"] = _with_blocks(mod["main"], [graph.block_from_graph(g)])
    return new


def test_split_read_by_fusing_ops_becomes_free_slices():
    """Every part read by element-wise ops or a transpose: one slice per part, computing
    the same through TVM, each priced as free, so the graph costs the split's kernel less."""
    mod = _split_module(lambda p: R.add(p, const((4, 16), seed=1)))
    g = _graph(mod)
    sliced = splits_to_slices(g)
    assert sliced is not g
    ops = relax_ops(_rebuilt(mod, sliced))
    assert "relax.split" not in ops and ops["relax.strided_slice"] == 3, ops
    assert_close(mod, _rebuilt(mod, sliced))
    slices = [nid for nid in sliced.reachable() if sliced.nodes[nid].op == "StridedSlice"]
    assert fused_slices(sliced) == set(slices)
    roofline = cost.RooflineCostModel("llvm")
    split = next(n for n in g.nodes if n.op == "Split")
    split_us = roofline.node_cost("Split", split.attrs, [g.nodes[split.inputs[0]].ty], split.ty, False)
    assert split_us > 1.0  # a kernel: a launch and a copy
    saved = dag_cost(g, roofline) - dag_cost(sliced, roofline)
    assert abs(saved - split_us) < 1e-3


def test_split_with_a_part_read_by_a_matmul_stays():
    """A slice read by a matmul is a copy kernel of its own: the split stays, and a slice
    read that way is priced as the kernel it is."""
    mod = _split_module(lambda p: R.matmul(p, const((16, 16), seed=2)))
    g = _graph(mod)
    assert splits_to_slices(g) is g
    x = tensor("x", (4, 48))

    def body(bb, x):
        s = bb.emit(R.strided_slice(x, [1], [0], [16]))
        return R.matmul(s, const((16, 16), seed=2))

    g = _graph(module([x], body))
    assert fused_slices(g) == set()
    roofline = cost.RooflineCostModel("llvm")
    assert dag_cost(g, roofline) > 2 * roofline.machine.launch_us  # two kernels


def test_split_whose_part_is_an_output_stays():
    """A part the block returns has no reader inside it to fuse into."""
    x = tensor("x", (4, 48))

    def body(bb, x):
        parts = bb.emit(R.split(R.nn.relu(x), 2, axis=1))
        a = bb.emit(relax.TupleGetItem(parts, 0))
        b = bb.emit(R.nn.relu(relax.TupleGetItem(parts, 1)))
        return relax.Tuple([a, b])

    g = _graph(module([x], body))
    assert splits_to_slices(g) is g


def _kernels(mod) -> int:
    """How many TIR kernels TVM's build makes of ``mod``'s main (weights bound: none)."""
    fused = tune.fuse_for_tuning(mod, tvm.target.Target("llvm"))
    return sum(not isinstance(f, relax.Function) for f in fused.functions.values())


def test_tvm_fuses_the_slices_into_their_readers():
    """What the pricing assumes of FuseOps: with slices, the build has one kernel fewer
    than with the split (the split's copy): matmul, split and three readers against
    matmul and three slice+reader kernels."""
    mod = _split_module(lambda p: R.add(p, const((4, 16), seed=1)))
    g = _graph(mod)
    assert _kernels(_rebuilt(mod, g)) == 5
    assert _kernels(_rebuilt(mod, splits_to_slices(g))) == 4
