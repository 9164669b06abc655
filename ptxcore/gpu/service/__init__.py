"""The profiling service: an HTTP front (FastAPI) over one persistent worker per GPU, with durable task
state, memory- and load-aware dispatch and a health monitor. See ptxcore.gpu.service.client for the client.

Importing this package pulls in no FastAPI or uvicorn; `app` and `server` do (the gpu/dev extras).
"""

from ptxcore.gpu.service.config import HealthThresholds, InsecureBindError, ServiceConfig, check_bind
from ptxcore.gpu.service.models import GpuCondition, LaneState, TaskKind, TaskState, TaskView

__all__ = [
    "HealthThresholds", "InsecureBindError", "ServiceConfig", "check_bind", "GpuCondition", "LaneState",
    "TaskKind", "TaskState", "TaskView",
]
