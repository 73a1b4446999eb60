"""The array API namespace: what ``zyx`` exports, one module per category of the standard.

``import zyx`` does not import this package; the first access to one of its names does
(``zyx.asarray``, ``zyx.float32``, ...), and it imports no numpy until an array is made.
"""

from zyx.array import (
    constants,
    creation,
    dtypes,
    elementwise,
    indexing,
    info,
    linalg,
    manipulation,
    searching,
    sets,
    sorting,
    statistical,
)
from zyx.array.constants import *  # noqa: F403
from zyx.array.creation import *  # noqa: F403
from zyx.array.dtypes import *  # noqa: F403
from zyx.array.elementwise import *  # noqa: F403
from zyx.array.indexing import *  # noqa: F403
from zyx.array.info import *  # noqa: F403
from zyx.array.linalg import *  # noqa: F403
from zyx.array.manipulation import *  # noqa: F403
from zyx.array.searching import *  # noqa: F403
from zyx.array.sets import *  # noqa: F403
from zyx.array.sorting import *  # noqa: F403
from zyx.array.statistical import *  # noqa: F403
from zyx.tensor import Tensor

CATEGORIES = (
    constants, creation, dtypes, elementwise, indexing, info, linalg, manipulation,
    searching, sets, sorting, statistical,
)  # fmt: skip

__all__ = ["Tensor", *(name for module in CATEGORIES for name in module.__all__)]
__array_api_version__ = "2024.12"
