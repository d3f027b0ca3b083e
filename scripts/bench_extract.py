"""Extraction benchmark: each extractor on the saturated e-graphs of the models.

For every model: grow the e-graph of each dataflow block with all rule families
(saturation), then run each extractor on the same snapshot and record its time
and the DAG cost of its answer (roofline costs, llvm).  Node costs are computed
once per e-graph (``cost_s``) and looked up by every extractor, so ``extract_s``
is the extractor's own time (median of ``--repeat`` runs for the heuristics, one
run for the ILPs).  Writes ``benchmarks/results/extract-llvm.csv`` and a JSON
sidecar with the machine and versions.

Models (``kind`` column): ``real`` ones are PyTorch models imported through
Relax and grown with our rules; ``synthetic`` ones are e-graphs generated here,
without egglog, to reach sizes our rules do not grow real models to (many
parallel-matmul groups, every merge of each group, merged bias adds, commuted
twins).  The ILP rows: ``ilp`` (shrunk, warm-started, HiGHS default gap, stopping
after ``ilp.STALL_S`` seconds without a better graph: what the pass runs), ``ilp_1pct``
(the same, stopping within 1% of the bound), ``ilp_noshrink`` (no problem shrinking, for
comparison; same warm start) and ``ilp_patient`` (no stall rule: the whole ``--ilp-limit``).

With ``--from-pass`` the e-graphs are the ones the pass itself extracts from: each model
(``tvm_eqsat.models``, full size unless ``--small``) goes through ``tvm_eqsat.optimize``
for ``--target`` (a kind), ``--mcpu`` and ``--flow``, targets made as ``benchmark.py`` makes
them, with the pass's default rule families and cost model for those, and each
block's snapshot and node costs are taken where the pass extracts (``kind`` ``pass``):

    python scripts/bench_extract.py
    python scripts/bench_extract.py --from-pass --mcpu emeraldrapids --flow tuned \
        --models squeezenet resnet50 --ilps ilp ilp_patient --out benchmarks/results/extract-pass.csv
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import os
import random
import statistics
import sys
import time

from tqdm import tqdm

from tvm_eqsat import models, provenance
from tvm_eqsat.cost import make_cost_model
from tvm_eqsat.egraph import ENode, Snapshot
from tvm_eqsat.extract import EXTRACTORS, choice_cost, extract, snapshot_node_cost
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.ilp import ilp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # benchmark.py's targets, for --from-pass

FIELDS = [
    "model", "kind", "block", "enodes", "eclasses", "grow_s", "cost_s", "extractor",
    "extract_s", "dag_cost_us", "vs_ilp", "ilp_vars", "ilp_status", "ilp_gap", "ilp_improvements",
]  # fmt: skip
HEURISTICS = [m for m in EXTRACTORS if m != "ilp"]
ILPS = {
    "ilp": {},
    "ilp_1pct": {"rel_gap": 1e-2},
    "ilp_noshrink": {"shrink": False},
    "ilp_patient": {"stall_s": math.inf},
}


# ---------------------------------------------------------------- real models


def _per_head_attention(layers: int = 4, heads: int = 4, hidden: int = 256, seq: int = 64, seed: int = 0):
    """Transformer layers with one Linear per head for Q, K and V (3 x heads matmuls on one input).

    Real, imported like the others; with all N-way merges of 12 linears the
    e-graph reaches ~20k e-nodes in 3 iterations: the stress case for extraction.
    """
    torch = models.seeded(seed)
    nn = torch.nn
    d = hidden // heads

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.ModuleList(nn.Linear(hidden, d) for _ in range(heads))
            self.k = nn.ModuleList(nn.Linear(hidden, d) for _ in range(heads))
            self.v = nn.ModuleList(nn.Linear(hidden, d) for _ in range(heads))
            self.o, self.up, self.down = (
                nn.Linear(hidden, hidden),
                nn.Linear(hidden, 4 * hidden),
                nn.Linear(4 * hidden, hidden),
            )
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)

        def forward(self, x):
            outs = []
            for q, k, v in zip(self.q, self.k, self.v):
                outs.append(torch.softmax(q(x) @ k(x).transpose(-1, -2) / d**0.5, dim=-1) @ v(x))
            x = self.ln1(x + self.o(torch.cat(outs, -1)))
            return self.ln2(x + self.down(torch.nn.functional.gelu(self.up(x))))

    x = torch.randn(seq, hidden)
    net = nn.Sequential(*[Layer() for _ in range(layers)])
    return models.Model(f"per-head-l{layers}-h{heads}", models.import_torch(net, (x,)), [x.numpy()])


def _llama(layers: int = 8, hidden: int = 512, heads: int = 8, seq: int = 64, seed: int = 0):
    """transformers LlamaModel (Q/K/V and gate/up projections on shared inputs), explicit attention mask."""
    torch = models.seeded(seed)
    from transformers import LlamaConfig, LlamaModel

    config = LlamaConfig(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        intermediate_size=(hidden * 8 // 3) // 64 * 64, vocab_size=1000, max_position_embeddings=max(512, seq),
        use_cache=False,
    )  # fmt: skip
    ids = torch.randint(0, 1000, (1, seq))
    mask = torch.ones(1, seq, dtype=torch.int64)
    return models.Model(f"llama-l{layers}", models.import_torch(LlamaModel(config), (ids, mask)), [])


# name -> (builder, node limit or None for --node-limit)
REAL = {
    "bert-small": (models.MODELS["bert-small"], None),
    "resnet-block": (models.MODELS["resnet-block"], None),
    "bert-base": (models.MODELS["bert-base"], None),
    "resnet50": (models.MODELS["resnet50"], None),
    "bert-large": (lambda: models.bert(hidden=1024, layers=24, heads=16, seq=128), None),
    "llama-l8": (_llama, None),
    # one more saturation iteration than 20000 allows: 3 iterations, ~22k e-nodes
    "per-head-l4": (_per_head_attention, 25000),
}


def real_snapshots(name: str, node_limit: int):
    """(block index, snapshot, roots, seconds to grow) for each dataflow block of a real model."""
    from tvm import relax

    from tvm_eqsat.egraph import TensorEGraph
    from tvm_eqsat.graph import Unsupported, graph_from_block
    from tvm_eqsat.rules import load_library
    from tvm_eqsat.saturate import saturate

    build, limit = REAL[name]
    model = build()
    library = load_library()
    program = library.program()
    for i, block in enumerate(model.mod["main"].body.blocks):
        if not isinstance(block, relax.DataflowBlock):
            continue
        try:
            graph = graph_from_block(block)
        except Unsupported:
            continue
        egraph = TensorEGraph(graph, program)
        t = time.perf_counter()
        saturate(
            egraph, library.families, node_limit=limit or node_limit, iter_limit=30, deadline=time.monotonic() + 300
        )
        grow_s = time.perf_counter() - t
        snap = egraph.snapshot()
        yield i, snap, [snap.root_of[nid] for _, nid in graph.outputs], grow_s


def pass_snapshots(name: str, small: bool, kind: str, mcpu: str, flow: str):
    """(block index, snapshot, roots, seconds to grow, node cost) for each block the pass
    extracts from when it optimizes the model for the benchmark's target (``kind``, ``mcpu``)
    and ``flow`` with its defaults."""
    from benchmark import make_target  # (scripts/ is on the path: see the imports)

    import tvm_eqsat
    from tvm_eqsat import transform

    target = make_target(kind, "", mcpu)
    model = (models.SMALL if small else models.MODELS)[name]()
    captured = []
    extract_in_pass = transform.extract

    def capture(snap, roots, node_cost, method, budget):
        captured.append((snap, roots, node_cost))
        return extract_in_pass(snap, roots, node_cost, "dag_local", budget)

    transform.extract = capture
    try:
        _, report = tvm_eqsat.optimize(model.mod, target, flow=flow, validate=False)
    finally:
        transform.extract = extract_in_pass
    grow_s = sum(f.seconds.get("grow", 0.0) for f in report.functions.values())  # the report's, over all blocks
    for block, (snap, roots, node_cost) in enumerate(captured):
        yield block, snap, roots, grow_s / len(captured), node_cost


# ---------------------------------------------------------------- synthetic e-graphs


class _Builder:
    """Appends e-classes to a Snapshot under construction."""

    def __init__(self) -> None:
        self.classes: list[list[ENode]] = []
        self.ty: list = []
        self.is_const: list[bool] = []

    def add(self, ty, *nodes: ENode, const: bool = False) -> int:
        self.classes.append(list(nodes))
        self.ty.append(ty)
        self.is_const.append(const)
        return len(self.classes) - 1

    def snapshot(self) -> Snapshot:
        return Snapshot(classes=self.classes, ty=self.ty, is_const=self.is_const, root_of={})


def synthetic_egraph(layers: int, groups: int, hidden: int = 256, seq: int = 16, seed: int = 0):
    """A saturated-looking e-graph of a decoder stack at small batch (memory/launch bound).

    Each layer reads x; ``groups`` groups of 2-4 linears (x @ W_i + b_i, widths
    32-128) read x, and each group carries every merge of two or more of its
    linears (Concat of the weights, one Matmul, a Split, a TGet per part) and,
    for the merged matmul, the merged bias add (add-over-split).  Bias adds also
    have their commuted twin.  The parts are summed, projected back (Matmul) and
    become the next layer's x.  Returns (snapshot, roots).
    """
    rng = random.Random(seed)
    b = _Builder()
    f32 = "float32"
    x = b.add(TensorTy((seq, hidden), f32), ENode("Input", (0,), ()))
    for layer in range(layers):
        parts = []
        for group in range(groups):
            widths = [rng.choice([32, 64, 128]) for _ in range(rng.randint(2, 4))]
            tag = (layer, group)
            w = [
                b.add(TensorTy((hidden, n), f32), ENode("Const", (tag, i), ()), const=True)
                for i, n in enumerate(widths)
            ]
            bias = [
                b.add(TensorTy((n,), f32), ENode("Const", (tag, i, "b"), ()), const=True) for i, n in enumerate(widths)
            ]
            lin = [
                b.add(TensorTy((seq, n), f32), ENode("Matmul", ("float32",), (x, w[i]))) for i, n in enumerate(widths)
            ]
            out = [
                b.add(TensorTy((seq, n), f32), ENode("Add", (), (lin[i], bias[i])), ENode("Add", (), (bias[i], lin[i])))
                for i, n in enumerate(widths)
            ]
            for size in range(2, len(widths) + 1):
                for members in itertools.combinations(range(len(widths)), size):
                    n = sum(widths[i] for i in members)
                    cuts = tuple(itertools.accumulate(widths[i] for i in members[:-1]))
                    part_tys = tuple(TensorTy((seq, widths[i]), f32) for i in members)
                    wcat = b.add(
                        TensorTy((hidden, n), f32), ENode("Concat", (1,), tuple(w[i] for i in members)), const=True
                    )
                    mm = b.add(TensorTy((seq, n), f32), ENode("Matmul", ("float32",), (x, wcat)))
                    split = b.add(part_tys, ENode("Split", (cuts, 1), (mm,)))
                    bcat = b.add(
                        TensorTy((n,), f32), ENode("Concat", (0,), tuple(bias[i] for i in members)), const=True
                    )
                    added = b.add(TensorTy((seq, n), f32), ENode("Add", (), (mm, bcat)))
                    split_added = b.add(part_tys, ENode("Split", (cuts, 1), (added,)))
                    for part, i in enumerate(members):
                        b.classes[lin[i]].append(ENode("TGet", (part,), (split,)))
                        b.classes[out[i]].append(ENode("TGet", (part,), (split_added,)))
            parts.extend(out)
        total = b.add(TensorTy((seq, sum(b.ty[p].shape[1] for p in parts)), f32), ENode("Concat", (1,), tuple(parts)))
        wo = b.add(TensorTy((b.ty[total].shape[1], hidden), f32), ENode("Const", (layer, "o"), ()), const=True)
        x = b.add(TensorTy((seq, hidden), f32), ENode("Matmul", ("float32",), (total, wo)))
    return b.snapshot(), [x]


SYNTHETIC = {  # name -> generator arguments
    "synthetic-2k": {"layers": 6, "groups": 4},
    "synthetic-20k": {"layers": 46, "groups": 6},
}


# ---------------------------------------------------------------- measuring


def bench_snapshot(name, kind, block, snap, roots, grow_s, raw, ilp_limit, repeat, ilps=tuple(ILPS)) -> list[dict]:
    """Every heuristic and the ``ilps`` on one snapshot, priced by ``raw`` (a NodeCost)."""
    t = time.perf_counter()
    cached = {(c, k): raw(c, node) for c, nodes in enumerate(snap.classes) for k, node in enumerate(nodes)}
    index = {id(node): k for nodes in snap.classes for k, node in enumerate(nodes)}
    cost_s = time.perf_counter() - t

    def node_cost(c, node):
        return cached[(c, index[id(node)])]

    results = {}
    for method in HEURISTICS:
        times = []
        for _ in range(repeat):
            t = time.perf_counter()
            choice = extract(snap, roots, node_cost, method, ilp_limit)
            times.append(time.perf_counter() - t)
        results[method] = (statistics.median(times), choice_cost(snap, choice, roots, node_cost), {})
    for method in ilps:
        options, info = ILPS[method], {}
        t = time.perf_counter()
        choice = ilp(snap, node_cost, roots, ilp_limit, info=info, **options)
        results[method] = (time.perf_counter() - t, choice_cost(snap, choice, roots, node_cost), info)
    base = results["ilp"][1] if "ilp" in results else min(dag for _, dag, _ in results.values())
    rows = []
    for method, (seconds, dag, info) in results.items():
        gap = info.get("gap")
        rows.append(
            {
                "model": name,
                "kind": kind,
                "block": block,
                "enodes": snap.n_nodes,
                "eclasses": len(snap.classes),
                "grow_s": round(grow_s, 3),
                "cost_s": round(cost_s, 3),
                "extractor": method,
                "extract_s": round(seconds, 4),
                "dag_cost_us": round(dag, 3),
                "vs_ilp": round(dag / base, 5),
                "ilp_vars": info.get("ilp_nodes", ""),
                "ilp_status": info.get("status", ""),
                "ilp_gap": "" if gap is None else f"{gap:.1e}",
                "ilp_improvements": info.get("improvements", ""),
            }
        )
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=[*REAL, *SYNTHETIC], help=f"from {[*REAL, *SYNTHETIC]}")
    parser.add_argument("--node-limit", type=int, default=20000)
    parser.add_argument("--ilp-limit", type=float, default=60.0)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each heuristic (median reported)")
    parser.add_argument("--ilps", nargs="+", choices=list(ILPS), default=list(ILPS), help="ILP variants to run")
    parser.add_argument("--from-pass", action="store_true", help="the e-graphs the pass extracts from (models by name)")
    parser.add_argument("--small", action="store_true", help="with --from-pass: the small variants of the models")
    parser.add_argument("--target", default="llvm", help="with --from-pass: the pass's target kind")
    parser.add_argument("--mcpu", default="generic", help="with --from-pass: the llvm target's CPU, as benchmark.py")
    parser.add_argument("--flow", default="tuned", help="with --from-pass: the pass's build flow")
    parser.add_argument("--out", default="benchmarks/results/extract-llvm.csv")
    args = parser.parse_args(argv)
    if args.from_pass and set(args.models) - set(models.MODELS):
        parser.error(f"--from-pass takes models of tvm_eqsat.models: {sorted(models.MODELS)}")
    cost = make_cost_model("roofline", "llvm")
    rows = []
    for name in tqdm(args.models, desc="models"):
        if args.from_pass:
            graphs, kind = pass_snapshots(name, args.small, args.target, args.mcpu, args.flow), "pass"
        elif name in SYNTHETIC:
            t = time.perf_counter()
            snap, roots = synthetic_egraph(**SYNTHETIC[name])
            graphs = [(0, snap, roots, time.perf_counter() - t, None)]
            kind = "synthetic"
        else:
            graphs, kind = ((*g, None) for g in real_snapshots(name, args.node_limit)), "real"
        for block, snap, roots, grow_s, node_cost in graphs:
            priced = node_cost or snapshot_node_cost(snap, cost, roots)
            rows.extend(
                bench_snapshot(name, kind, block, snap, roots, grow_s, priced, args.ilp_limit, args.repeat, args.ilps)
            )
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    sidecar = {
        **provenance.record(),
        "cost_model": f"the pass's default for {args.target} -mcpu={args.mcpu}, {args.flow} flow"
        if args.from_pass
        else "roofline (llvm)",
        "node_limit": args.node_limit,
        "node_limits_per_model": {k: v for k, (_, v) in REAL.items() if v},
        "ilp_time_limit_s": args.ilp_limit,
        "repeat": args.repeat,
        "synthetic": SYNTHETIC,
        "command": " ".join(["python scripts/bench_extract.py", *(sys.argv[1:] if argv is None else argv)]),
    }
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump(sidecar, f, indent=2)
    print(",".join(FIELDS))
    for r in rows:
        print(",".join(str(r[k]) for k in FIELDS))


if __name__ == "__main__":
    main()
