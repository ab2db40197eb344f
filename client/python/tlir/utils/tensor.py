"""tlir.utils.tensor - TileLang's get_tensor_supply and TensorSupplyType:
random (or constant) inputs for a kernel's parameters, made as the
profiler makes them: CUDA tensors where PyTorch sees a GPU, else NumPy
arrays (which the interpreter runs on)."""


class TensorSupplyType:
    Integer, Uniform, Normal, Randn, Zero, One, Auto = range(7)


def make_array(shape, dtype, supply_type=TensorSupplyType.Auto, rng=None):
    """A NumPy array of `shape` for a parameter of Tile IR dtype `dtype`:
    Auto and Randn/Normal standard normal floats, Uniform in [-1, 1),
    Integer (and Auto for integers) whole numbers in [-8, 8) ([0, 8) for
    unsigned types), bool 0/1, Zero and One constants.  float16 and float64
    arrays have their dtype; other floats (bfloat16, float8) are float32
    values, converted where they are passed."""
    import numpy as np
    rng = rng if rng is not None else np.random.default_rng(0)
    shape = list(shape)
    floating = dtype.startswith("float") or dtype == "bfloat16"
    if supply_type == TensorSupplyType.Zero:
        a = np.zeros(shape, np.float32)
    elif supply_type == TensorSupplyType.One:
        a = np.ones(shape, np.float32)
    elif dtype == "bool":
        a = rng.integers(0, 2, shape)
    elif supply_type == TensorSupplyType.Uniform and floating:
        a = rng.uniform(-1, 1, shape)
    elif floating and supply_type != TensorSupplyType.Integer:
        a = rng.standard_normal(shape)
    else:
        a = rng.integers(0 if dtype.startswith("uint") else -8, 8, shape)
    if dtype == "bool":
        return a.astype(bool)
    if dtype in ("float16", "float64") or not floating:
        return a.astype(dtype)
    return a.astype(np.float32)


def get_tensor_supply(supply_type=TensorSupplyType.Auto):
    """get_tensor_supply(type)(param) -> a tensor for `param`, an entry of a
    kernel's `params` (or anything with `shape` and `dtype`): a CUDA tensor
    where PyTorch sees a GPU, else a NumPy array."""
    def get_tensor(param):
        from .._runtime import _cuda_torch
        shape = param["shape"] if isinstance(param, dict) else param.shape
        dt = param["dtype"] if isinstance(param, dict) else param.dtype
        dt = getattr(dt, "name", dt) if not isinstance(dt, str) else dt
        if any(not isinstance(d, int) for d in shape):
            from .._ir import TlirError
            raise TlirError("get_tensor_supply needs constant shapes, not %s" % (list(shape),))
        a = make_array(shape, str(dt).replace("torch.", ""), supply_type)
        torch = _cuda_torch()
        if torch is None:
            return a
        from .._torch import torch_dtype
        return torch.from_numpy(a).to(torch_dtype(str(dt).replace("torch.", ""))).cuda()
    return get_tensor
