"""The DuckDB warehouse: the only ptxcore package that imports duckdb or pyarrow.

`Warehouse(path)` holds campaigns, trajectories, turns, kernels (by sha256), evaluations, target
evidence, reference latencies and environments; the paper's metrics are views over it.
"""

from .ddl import TABLES, WAREHOUSE_SCHEMA_VERSION
from .store import Warehouse, WarehouseError, WarehouseLockedError

__all__ = ["TABLES", "WAREHOUSE_SCHEMA_VERSION", "Warehouse", "WarehouseError", "WarehouseLockedError"]
