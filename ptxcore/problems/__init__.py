"""Problem catalog: FlashInfer-Trace definitions and workloads under problems/, plus our extensions."""

from .catalog import (
    CatalogError,
    Problem,
    ProblemNotFoundError,
    default_problems_dir,
    get_problem,
    load_catalog,
)
from .extension import (
    Baseline,
    BaselineLibrary,
    BytesRule,
    FlopsFormula,
    InputDistribution,
    ProblemExtension,
    Structure,
    Tolerance,
    WorkSpec,
)
from .work import ProblemWork, WorkError, problem_work

__all__ = [
    "CatalogError", "Problem", "ProblemNotFoundError", "default_problems_dir", "get_problem",
    "load_catalog", "Baseline", "BaselineLibrary", "InputDistribution", "ProblemExtension",
    "Structure", "Tolerance", "BytesRule", "FlopsFormula", "WorkSpec", "ProblemWork", "WorkError", "problem_work",
]
