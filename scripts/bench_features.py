"""How fast the learned cost model's featurizer is: every kernel e-node of the small
models' saturated e-graphs, repeated to ``--nodes``, featurized in bulk
(``features.featurize``) and one at a time (``features.features``, the reference).  The
bulk path numbers type objects once, so it is also timed on items that share no object
(deep copies: every type seen for the first time).

    python scripts/bench_features.py --nodes 10000
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import numpy as np

from tvm_eqsat import features, models
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.graph import TensorTy, graph_from_block
from tvm_eqsat.rules import load_library
from tvm_eqsat.saturate import saturate


def kernel_items(names) -> list[tuple]:
    library = load_library()
    items = []
    for name in names:
        g = graph_from_block(models.SMALL[name]().mod["main"].body.blocks[0])
        eg = TensorEGraph(g, library.program())
        saturate(eg, library.families, node_limit=20000, iter_limit=30, deadline=time.monotonic() + 60)
        snap = eg.snapshot()
        for c, nodes in enumerate(snap.classes):
            for n in nodes:
                in_tys = [snap.ty[k] for k in n.children]
                if (
                    n.op in features.KERNEL_OPS
                    and snap.ty[c] is not None
                    and all(isinstance(t, TensorTy) for t in in_tys)
                ):
                    items.append((n.op, n.attrs, in_tys, snap.ty[c]))
    return items


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    base = kernel_items(
        ["inception-v3", "resnext50", "bert-base", "nasnet-a", "squeezenet", "mobilenet-v2", "vit-b16", "nasrnn"]
    )
    items = (base * (args.nodes // len(base) + 1))[: args.nodes]
    fresh = [copy.deepcopy(i) for i in items]
    timings = {}
    for label, fn in (
        ("one at a time", lambda: np.stack([features.features(*i) for i in items])),
        ("featurize", lambda: features.featurize(items)),
        ("no shared type", lambda: features.featurize(fresh)),
    ):
        runs = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t)
        timings[label] = statistics.median(runs)
    reference = np.stack([features.features(*i) for i in items])
    same = np.array_equal(reference, features.featurize(items)) and np.array_equal(reference, features.featurize(fresh))
    print(f"{len(base)} distinct kernel e-nodes, {len(items)} featurized; identical: {same}")
    for label, s in timings.items():
        print(f"{label:>14}: {s * 1e3:.1f} ms (median of {args.repeat})")


if __name__ == "__main__":
    main()
