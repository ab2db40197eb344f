"""tlir.layout - layouts that Tile IR v1 can say: the swizzle
(annotate_layout's "swizzle") and index maps (T.Layout)."""

from .language import Layout, make_swizzled_layout  # noqa: F401
