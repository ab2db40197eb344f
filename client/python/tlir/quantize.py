"""tlir.quantize - the unpacking helpers of TileLang's dequantize examples,
as Tile IR expressions."""

from . import language as T
from ._ir import error


def _tir_packed_to_unsigned_convert(storage_type="uint", storage_nbit=8):
    """f(nbit, val, pos, dtype): the pos-th nbit-wide unsigned field of val."""
    def f(nbit, val, pos, dtype):
        mask = (1 << nbit) - 1
        return T.cast((val >> (pos * nbit)) & mask, dtype)
    return f


def _tir_packed_to_signed_convert(storage_type="int", storage_nbit=8):
    """f(nbit, val, pos, dtype): the pos-th nbit-wide field, minus 2^(nbit-1)."""
    def f(nbit, val, pos, dtype):
        mask = (1 << nbit) - 1
        return T.cast(((val >> (pos * nbit)) & mask) - (1 << (nbit - 1)), dtype)
    return f


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise error("tilelang.quantize.%s is not part of tlir" % name)
