"""OpenVINO imported with its usage telemetry declined, for this process.

Unless a consent file in the home folder says no, `import openvino` (its
ovc tool) writes ~/intel/ and sends a usage event to Google Analytics from
a process forked off a thread, beside TensorFlow's and OpenVINO's own
threads. This project reaches no network at run time and writes nothing
outside its outputs, so the package's first openvino import (fusions.py)
comes after `decline()`. The user's consent file, if any, is not touched.
"""


def decline():
  """Every consent check of openvino_telemetry in this process says no."""
  try:
    from openvino_telemetry.utils import opt_in_checker
  except ImportError:  # a release without it sends nothing
    return
  declined = opt_in_checker.ConsentCheckResult.DECLINED
  opt_in_checker.OptInChecker.check = lambda *args, **kwargs: declined
