"""Stand-in for the NKI frontend's `nki` package (see ../README.md)."""

from nki.compile import GenericKernel


def jit(func):
    return GenericKernel(func)


def standin_returns(*names):
    """Which arguments the kernel returns (what a real trace would find)."""

    def mark(func):
        func.standin_returns = names
        return func

    return mark


def standin_results(results):
    """The fresh arrays the kernel returns, from its bound arguments."""

    def mark(func):
        func.standin_results = results
        return func

    return mark
