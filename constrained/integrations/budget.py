"""`BudgetGuard` for serving integrations: the guard lives with the rest of the budget
rule in `constrained.decoding.budget`; this is its import path for the integrations.

Example:
    >>> from constrained.decoding.budget import BudgetGuard as Guard
    >>> BudgetGuard is Guard
    True
"""

from constrained.decoding.budget import FAR_SLACK, FAR_STEP, REFRESH, BudgetGuard

__all__ = ["FAR_SLACK", "FAR_STEP", "REFRESH", "BudgetGuard"]
