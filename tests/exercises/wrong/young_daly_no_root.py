"""Wrong: 2δM, the square root forgotten."""


def young_daly(delta, mtbf):
    return 2 * delta * mtbf
