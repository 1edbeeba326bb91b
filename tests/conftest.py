"""pytest entry point: import course first, so it picks GPU or simulator before numba loads."""

import course  # noqa: F401  (must stay the first import)
import pytest


def pytest_report_header(config):
    return f"course device: {course.DEVICE.describe()}"


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason=f"needs a CUDA GPU; running on {course.DEVICE.describe()}")
    skip_sim = pytest.mark.skip(reason="checks the simulator's teaching errors; a real GPU has none")
    for item in items:
        if "gpu" in item.keywords and not course.ON_GPU:
            item.add_marker(skip_gpu)
        if "sim" in item.keywords and course.ON_GPU:
            item.add_marker(skip_sim)
