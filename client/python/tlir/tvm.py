"""tlir.tvm - the part of TVM that TileLang examples use at the Python
level: DataType(dtype).bits.  (`from tvm import DataType` becomes
`from tlir.tvm import DataType`.)"""

from ._ir import DTYPE_BITS, dtype_name


class DataType:
    def __init__(self, dtype):
        self.name = dtype_name(dtype)
        self.bits = DTYPE_BITS[self.name]

    def __str__(self):
        return self.name


from . import testing  # noqa: E402,F401  (tvm.testing.requires_package)
