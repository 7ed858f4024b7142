"""Names PyTorch has (placeholder until the generated table lands)."""


def is_torch_function(name: str) -> bool:
    return False


def is_tensor_method(name: str) -> bool:
    return False
