"""Wrong: p/(m + p), a step one slot too long and every rank idle one slot more."""

from fractions import Fraction


def bubble_formula(name, p, m):
    return Fraction(p, m + p)
