"""Small and read-only disks for the fault tests.

Where mounting is allowed (the tests run as root) a disk is a real tmpfs
of a few MB, filled to the byte with a ballast file at the moment a test
picks, so the kernel itself answers ENOSPC or EROFS. Where it is not, the
same places get an injected error instead: `Disk.mounted` says which, and
each test injects at the write path it covers.
"""

import contextlib
import errno
import os
import subprocess


class Disk:
  """A folder on its own file system (`mounted`), or a plain folder."""

  def __init__(self, path, mounted):
    self.path, self.mounted = path, mounted
    self._ballast = path / ".ballast"

  def fill(self, leave=0):
    """Leaves `leave` bytes free (rounded to pages by tmpfs)."""
    assert self.mounted
    stats = os.statvfs(self.path)
    free = stats.f_bavail * stats.f_frsize
    with open(self._ballast, "ab") as f:
      os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size +
                         max(free - leave, 1))

  def free(self):
    """Gives the space back (the ballast is not part of any output)."""
    if self._ballast.exists():
      self._ballast.unlink()

  def read_only(self):
    assert self.mounted
    _mount("-o", "remount,ro", str(self.path))


def _mount(*args):
  try:
    return subprocess.run(["mount", *args], capture_output=True,
                          timeout=60).returncode == 0
  except OSError:  # no mount(8) here
    return False


@contextlib.contextmanager
def small_disk(path, size="16m"):
  """A tmpfs of `size` at `path` (made), unmounted at the end."""
  path.mkdir(parents=True, exist_ok=True)
  # SMALL_DISK_INJECT=1 tries the injected errors where mounting works.
  mounted = not os.environ.get("SMALL_DISK_INJECT") and _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
  try:
    yield Disk(path, mounted)
  finally:
    if mounted:
      subprocess.run(["umount", "-l", str(path)], capture_output=True,
                     timeout=60)


def no_space(path=None):
  """The OSError a full disk raises."""
  return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
