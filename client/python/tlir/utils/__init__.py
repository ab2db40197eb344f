"""tlir.utils: TileLang's tilelang.utils names that its examples import."""
