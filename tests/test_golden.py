"""Golden tests of the pass: a module before, the module expected after, compared with
``tvm.ir.assert_structural_equal`` (as TVM's own ``test_transform_*.py`` do)."""

import tvm
from tvm.script import ir as I
from tvm.script import relax as R

import tvm_eqsat


def _check(before: tvm.IRModule, expected: tvm.IRModule, **options) -> None:
    after, report = tvm_eqsat.optimize(before, "llvm", **options)
    assert not report.alarms, report.alarms
    tvm.ir.assert_structural_equal(after, expected)


def test_two_products_of_one_input_become_one():
    @I.ir_module
    class Before:
        @R.function
        def main(
            x: R.Tensor((4, 8), "float32"), w1: R.Tensor((8, 16), "float32"), w2: R.Tensor((8, 16), "float32")
        ) -> R.Tensor((4, 16), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                a = R.matmul(x, w1)
                b = R.matmul(x, w2)
                c = R.add(a, b)
                R.output(c)
            return c

    @I.ir_module
    class Expected:
        @R.function
        def main(
            x: R.Tensor((4, 8), "float32"), w1: R.Tensor((8, 16), "float32"), w2: R.Tensor((8, 16), "float32")
        ) -> R.Tensor((4, 16), "float32"):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                lv0 = R.add(w1, w2)
                c = R.matmul(x, lv0)
                R.output(c)
            return c

    _check(Before, Expected, fold_weights=True)


def test_identities_are_removed():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            with R.dataflow():
                a = R.reshape(x, (2, 3))
                b = R.nn.relu(a)
                c = R.nn.relu(b)
                d = R.permute_dims(c, [1, 0])
                e = R.permute_dims(d, [1, 0])
                R.output(e)
            return e

    @I.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor((2, 3), "float32")) -> R.Tensor((2, 3), "float32"):
            with R.dataflow():
                e = R.nn.relu(x)
                R.output(e)
            return e

    _check(Before, Expected)


def test_a_block_with_nothing_to_gain_comes_back_unchanged():
    @I.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 4), "float32")) -> R.Tensor((2, 4), "float32"):
            with R.dataflow():
                a = R.matmul(x, y)
                b = R.nn.relu(a)
                R.output(b)
            return b

    _check(Before, Before)
