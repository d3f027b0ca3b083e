"""The pass on real models imported from PyTorch: numerics must not change."""

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from helpers import relax_ops  # noqa: E402

import tvm_eqsat  # noqa: E402
from tvm_eqsat import models, verify  # noqa: E402


# bert (20 s on a 2-core Zen 3) is slow: the model zoo checks the pass on BERT-base, and
# test_bert_identity_ops_are_removed runs the pass on this model
@pytest.mark.parametrize(
    "build",
    [
        pytest.param(models.bert, marks=pytest.mark.slow, id="bert"),
        pytest.param(models.resnet_block, id="resnet-block"),
    ],
)
def test_imported_model_roundtrip_and_pass(build):
    model = build()
    back = tvm_eqsat.roundtrip(model.mod)
    new, report = tvm_eqsat.optimize(model.mod, "llvm")
    fn = report.functions["main"]
    assert not [s for s in fn.skipped if "internal error" in s], fn.skipped
    assert fn.enodes > 0
    inputs = model.inputs
    ref = verify.run(model.mod, inputs)
    for other in (back, new):
        got = verify.run(other, inputs)
        assert len(got) == len(ref)
        for a, b in zip(ref, got):
            assert a.shape == b.shape
            scale = max(1.0, float(abs(a).max()))
            assert float(abs(a - b).max()) <= 1e-5 * scale


def test_bert_identity_ops_are_removed():
    model = models.bert()
    new, report = tvm_eqsat.optimize(model.mod, "llvm")
    fn = report.functions["main"]
    assert fn.changed and fn.rules_applied.get("broadcast-identity", 0) > 0
    # the identity ops themselves (erf_rational writes each GELU as more, cheaper bindings)
    identities = ("relax.broadcast_to", "relax.reshape", "relax.astype")
    count = lambda m: sum(relax_ops(m).get(op, 0) for op in identities)  # noqa: E731
    assert count(new) < count(model.mod)
