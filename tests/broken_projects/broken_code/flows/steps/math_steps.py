def double(value):
    return value * 2


def halve(value):
    return value / 2
