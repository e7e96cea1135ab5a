"""`Constraint`: the one interface every sampler consumes.

The interface lives in `constrained.constraint` (a leaf module both packages import,
so `constrained` never imports `samplers` for it); these names are the same classes.
"""

from constrained.constraint import Constraint, SupportsCompletion, SupportsForcedTokens, Unconstrained

__all__ = ["Constraint", "SupportsCompletion", "SupportsForcedTokens", "Unconstrained"]
