"""Wrong: (p - 1)/m, the idle time over the ideal time, not over the step."""

from fractions import Fraction


def bubble_formula(name, p, m):
    return Fraction(p - 1, m)
