"""tvm-eqsat: equality-saturation graph rewriting for TVM Relax.

from tvm_eqsat import EqSatPass
mod = EqSatPass("llvm")(mod)
"""

import logging

from .report import FunctionReport, Report
from .transform import EqSatPass, Options, make_options, optimize, pipeline, roundtrip

__version__ = "0.1.0"
__all__ = [
    "EqSatPass",
    "FunctionReport",
    "Options",
    "Report",
    "make_options",
    "optimize",
    "pipeline",
    "roundtrip",
]

logging.getLogger("tvm_eqsat").addHandler(logging.NullHandler())
