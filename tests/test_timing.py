"""timing.kernel_times: where a build's time goes, per function the VM calls."""

from __future__ import annotations

import numpy as np
import tvm
from helpers import module, tensor
from tvm import relax

from tvm_eqsat import timing


def test_kernel_times_names_each_kernel_and_weighs_them():
    a, b, c = tensor("a", (256, 256)), tensor("b", (256, 256)), tensor("c", (4,))
    mod = module(
        [a, b, c], lambda bb, a, b, c: relax.Tuple([bb.emit(relax.op.matmul(a, b)), bb.emit(relax.op.add(c, c))])
    )
    target = tvm.target.Target("llvm")
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype("float32") for s in ((256, 256), (256, 256), (4,))]
    both = timing.kernel_times({"a": ex, "b": ex}, tvm.cpu(0), inputs, rounds=3, runs=5)
    assert set(both) == {"a", "b"} and set(both["a"]) == set(both["b"])
    us = both["a"]
    matmul = [k for k in us if "matmul" in k]
    add = [k for k in us if k.startswith("add")]
    assert len(matmul) == 1 and len(add) == 1, sorted(us)
    assert all(t >= 0 for t in us.values())
    # 2 x 256^3 FLOPs against 4 additions: the matmul must dominate
    assert us[matmul[0]] > 10 * us[add[0]]
