"""Wrong: √(δM), the factor 2 of the redone half-interval lost."""

import math


def young_daly(delta, mtbf):
    return math.sqrt(delta * mtbf)
