"""User-facing failures: one clear line on stderr and a non-zero exit."""

import functools
import re
import sys


class UserError(Exception):
  """A problem the user can fix (bad path, bad data, bad hparam).

  Scripts raise it anywhere; `main_guard` turns it into one line on stderr
  and exit status 2 instead of a traceback.
  """


def cause(error):
  """The OS's words in an OS or TensorFlow error ("No space left on
  device"), without the op, the function or the temporary file's name."""
  text = (getattr(error, "message", None) or getattr(error, "strerror", None)
          or str(error) or type(error).__name__)
  text = re.sub(r"\{\{[^}]*\}\}|\s*\[Op:\w+\]", "", text).strip()
  lines = text.rsplit("; ", 1)[-1].splitlines()
  return (lines or [type(error).__name__])[0][:200]


def main_guard(main_fn):
  """Wraps a script's main() so UserError ends as `error: <cause>`, exit 2."""

  @functools.wraps(main_fn)
  def wrapper(*args, **kwargs):
    try:
      return main_fn(*args, **kwargs)
    except UserError as e:
      print(f"error: {e}", file=sys.stderr, flush=True)
      sys.exit(2)
    except KeyboardInterrupt:
      print("error: interrupted", file=sys.stderr, flush=True)
      sys.exit(130)
    except RuntimeError as e:
      # Ctrl-C inside a C++ callback (TensorFlow's pybind11) arrives as
      # "pybind11::error_already_set: ... KeyboardInterrupt".
      if "KeyboardInterrupt" not in str(e):
        raise
      print("error: interrupted", file=sys.stderr, flush=True)
      sys.exit(130)

  return wrapper
