def combine(strict, lenient, extra=None):
    return {"score": (strict + lenient) / 2}
