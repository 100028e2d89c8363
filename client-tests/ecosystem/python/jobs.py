"""Job functions rq workers import by name."""


def add(a, b):
    return a + b


def fail(message):
    raise RuntimeError(message)
