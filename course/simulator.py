"""Placeholder: replaced by the simulator additions."""


def install() -> None:
    pass
