"""tlir.intrinsics - make_mma_swizzle_layout of the TileLang README: the
standard bank-conflict-free swizzle, chosen by tlc (annotate_layout
"swizzle", proto/tile-ir-v1.md 5.7)."""

from .language import make_swizzled_layout


def make_mma_swizzle_layout(buffer, is_smooth=False):
    return make_swizzled_layout(buffer)
