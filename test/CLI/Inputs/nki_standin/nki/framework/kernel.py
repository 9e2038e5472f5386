"""Stand-in for the beta 3 API's kernel object."""

import dataclasses
from typing import Callable


@dataclasses.dataclass
class Kernel:
    func: Callable
    lnc: int = 1
