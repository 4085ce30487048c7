"""The pure trimming core: data in, data out. No I/O, clock, logging or env."""

from trimgate.trimming.budget import effective_budget, reactive_budget
from trimgate.trimming.estimate import Calibration, observe, text_tokens
from trimgate.trimming.pipeline import Placement, Policy, TrimPlan, TrimReport, plan
from trimgate.trimming.turns import TrimResult, trim_to_recent_turns

__all__ = [
    "Calibration",
    "Placement",
    "Policy",
    "TrimPlan",
    "TrimReport",
    "TrimResult",
    "effective_budget",
    "observe",
    "plan",
    "reactive_budget",
    "text_tokens",
    "trim_to_recent_turns",
]
