"""Splits emitted as strided slices where FuseOps fuses the slices into their readers, the
reshapes FuseOps leaves alone, and both priced as what TVM then runs."""

import tvm
from helpers import assert_close, const, module, relax_ops, tensor
from tvm import relax
from tvm.relax import op as R

from tvm_eqsat import cost, graph, tune
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.extract import dag_cost, snapshot_node_cost
from tvm_eqsat.fusion import fused_slices, lone_reshape_nodes, lone_reshapes, splits_to_slices
from tvm_eqsat.rules import load_library
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


def _reshape_module():
    """Four reshapes, two of which FuseOps leaves alone: one between two matmuls (its input
    a matmul's, with a relu epilogue) and one of the input read by a matmul; the other two
    fuse into their readers, a transpose and an add."""
    x = tensor("x", (4, 64))

    def body(bb, x):
        lone_input = bb.emit(R.reshape(x, (8, 32)))
        a = bb.emit(R.matmul(lone_input, const((32, 16), seed=1)))  # (8, 16)
        a = bb.emit(R.nn.relu(a))
        lone_between = bb.emit(R.reshape(a, (16, 8)))
        b = bb.emit(R.matmul(lone_between, const((8, 8), seed=2)))  # (16, 8)
        into_permute = bb.emit(R.permute_dims(bb.emit(R.reshape(b, (8, 16))), (1, 0)))
        into_add = bb.emit(R.add(bb.emit(R.reshape(b, (4, 32))), const((4, 32), seed=3)))
        c = bb.emit(R.matmul(into_permute, const((8, 4), seed=4)))  # (16, 4)
        return relax.Tuple([c, into_add])

    return module([x], body)


def _fused_reshape_functions(mod) -> int:
    """How many functions TVM's fusion leaves holding a reshape alone."""
    mod = tvm.transform.Sequential(
        [
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
    )(mod)
    return sum(1 for gv in mod.functions if gv.name_hint.startswith("reshape"))


def test_lone_reshapes_are_the_ones_fuse_ops_leaves_alone():
    """The reshapes found alone are exactly the functions TVM's FuseOps makes of a reshape
    by itself, in the graph and, before any rewrite, in its e-graph."""
    mod = _reshape_module()
    g = _graph(mod)
    lone = lone_reshapes(g)
    assert _fused_reshape_functions(mod) == len(lone) == 2
    assert sorted(g.nodes[nid].ty.shape for nid in lone) == [(8, 32), (16, 8)]
    eg = TensorEGraph(g, load_library().program())
    snap = eg.snapshot()
    roots = [snap.root_of[nid] for _, nid in g.outputs]
    found = lone_reshape_nodes(snap, roots)
    assert sorted(snap.ty[c].shape for c, _ in found) == [(8, 32), (16, 8)]
    # extraction prices them as the copies a tuned build makes of them
    tuned = cost.RooflineCostModel("llvm", "tuned")
    with_context, alone = snapshot_node_cost(snap, tuned, roots), snapshot_node_cost(snap, tuned)
    for c, node in found:
        copy_us = tuned.reshape_copy_us(snap.ty[node.children[0]], snap.ty[c])
        assert with_context(c, node) == copy_us > 10 * alone(c, node)


def test_a_lone_reshape_costs_a_copy_only_where_the_build_copies_it():
    """In the llvm tuned flow a lone reshape is a copy kernel (the build applies the tuned
    schedules before RewriteDataflowReshape), so the graph costs its copy more; in the default
    flow and on CUDA it stays a view."""
    g = _graph(_reshape_module())
    tuned = cost.RooflineCostModel("llvm", "tuned")
    lone = sorted(lone_reshapes(g))

    def priced(model, n, copy):
        ins = [g.nodes[g.nodes[n].inputs[0]].ty]
        if copy:
            return model.reshape_copy_us(ins[0], g.nodes[n].ty)
        return model.node_cost("Reshape", g.nodes[n].attrs, ins, g.nodes[n].ty, False)

    assert all(priced(tuned, n, True) > tuned.machine.launch_us > priced(tuned, n, False) for n in lone)
    views = cost.RooflineCostModel("llvm", "tuned")
    views.copies_lone_reshapes = False
    extra = sum(priced(tuned, n, True) - priced(tuned, n, False) for n in lone)
    assert abs(dag_cost(g, tuned) - dag_cost(g, views) - extra) < 1e-6
    free = fused_slices(g)
    for kind, flow in (("llvm", "default"), ("cuda", "tuned")):
        other = cost.RooflineCostModel(kind, flow)
        assert not other.copies_lone_reshapes
        assert dag_cost(g, other) == sum(
            cost.EPSILON_US
            if nid in free
            else other.node_cost(n.op, n.attrs, [g.nodes[i].ty for i in n.inputs], n.ty, n.is_const)
            for nid, n in ((nid, g.nodes[nid]) for nid in g.reachable())
        )
