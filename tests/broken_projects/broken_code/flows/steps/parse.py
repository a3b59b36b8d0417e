def parse(n):
    return int(n)


DEFAULT = parse(DEFAULT_TEXT)  # noqa: F821
