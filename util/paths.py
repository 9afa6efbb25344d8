"""Records that travel: paths written into a results record relative to
the repository root (where the scripts run), so a fresh clone beside the
same data reads them, or as the name of a place that exists only on the
machine that ran ($OUT, $TMPDIR). The shared data beside the clone
(../shared/data) is always written as $DATA, so no record climbs out of
the repository (tests/test_results_recompute.py checks it)."""

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = "$DATA"


def _shared_data(root):
  return os.path.normpath(os.path.join(root, "..", "shared", "data"))


def portable(value, places=None, root=ROOT):
  """`value` (any JSON value) with each absolute path string rewritten:
  under a place of `places` ({"$OUT": path}, the longest first) as that
  name, else relative to `root` (`located` reads it back). Other strings,
  URLs included, stay."""
  places = {DATA: _shared_data(root), **(places or {})}
  places = sorted(places.items(), key=lambda p: -len(p[1]))
  if isinstance(value, dict):
    return {k: portable(v, dict(places), root) for k, v in value.items()}
  if isinstance(value, list):
    return [portable(v, dict(places), root) for v in value]
  if not (isinstance(value, str) and os.path.isabs(value)):
    return value
  for name, place in places:
    place = os.path.normpath(place)
    if value == place or value.startswith(place + os.sep):
      return name + value[len(place):]
  return os.path.relpath(value, root)


def located(path, root=ROOT):
  """A path read back from a record: a relative one is relative to `root`
  (as portable wrote it), whatever the reader's working folder; $DATA is
  the shared data beside the clone; "" and URLs stay as they are."""
  if not path or os.path.isabs(path) or "://" in path:
    return path
  if path == DATA or path.startswith(DATA + "/"):
    return _shared_data(root) + path[len(DATA):]
  return os.path.normpath(os.path.join(root, path))
