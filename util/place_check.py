"""Places outside the repository named in committed text (issue 63): an
absolute path (/work/..., /tmp/..., ~/...) or a relative one that climbs
out of the repository root with `..`. Records and commands are read from
the root (util/paths.py); a Markdown link from its own file's folder.
Placeholders ($OUT, $TMPDIR, $DATA, <mirror>) and URLs are not places."""

import os
import re

# Roots that only ever name a machine's own folders: one component is enough.
_ROOTS = ("work", "tmp", "root", "home", "opt", "usr", "var", "mnt", "srv",
          "etc", "scratch", "data", "private", "Users", "proc", "dev",
          "nfs", "gpfs", "lustre", "cluster", "sys", "bin", "lib", "media")
# A "/" that starts a path: not inside a word, number, URL or relative path.
_START = r"(?<![\w.~/\\$<>%@-])"
_ABSOLUTE = re.compile(
    _START + r"(?:/(?:" + "|".join(_ROOTS) + r")(?![\w.-])"
    r"|/[A-Za-z_][\w.+-]*/[\w.+-]+|~/[\w.+-])[\w.+@%/-]*")
_SHEBANG = re.compile(r"^\s*#!\S*", re.M)
_LINK = re.compile(r"\[([^\]\n]*)\]\(([^)\s]+)\)")
_TOKEN = re.compile(r"[^\s\"'`()\[\]{}<>,;=|]+")
_CLIMB = re.compile(r"(?:^|/)\.\.(?:/|$)")


def _climbs_out(path, base):
  """Whether `path`, read from `base` (a folder relative to the root),
  ends outside the root."""
  path = path.split("#")[0].rstrip(".:")
  if "://" in path or path.startswith(("$", "<")):
    return False
  joined = os.path.normpath(os.path.join(base, path))
  return joined == ".." or joined.startswith(".." + os.sep)


def outside_places(text, folder=".", markdown=False):
  """Each place outside the repository that `text` names, in order:
  `folder` is where the file lies, relative to the root, for a Markdown
  file's links."""
  text = _SHEBANG.sub("", text)
  found = [m.group(0) for m in _ABSOLUTE.finditer(text)]
  if markdown:  # a link and its text, if a path, from the file's folder
    for words, link in _LINK.findall(text):
      found += [t for t in [link, *_TOKEN.findall(words)]
                if _CLIMB.search(t) and _climbs_out(t, folder)]
    text = _LINK.sub("", text)
  found += [t for t in _TOKEN.findall(text)
            if _CLIMB.search(t) and _climbs_out(t, ".")]
  return found
