"""Types shared by the stubs of Strata's C extensions (no module at run time: only stubs import it)."""

from typing import Any, TypeAlias

import numpy as np

# Anything with the buffer protocol that the C code reads (numpy's stubs do not declare it as a Buffer).
Buffer: TypeAlias = bytes | bytearray | memoryview | np.ndarray[Any, Any]
