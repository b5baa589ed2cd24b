"""(being written)"""

from attnmatch.data.datasets._spec import DatasetSpec

SPECS: tuple[DatasetSpec, ...] = ()
