"""What a slot's run carries: the wheels the slot lacks, and its size."""

from importlib import metadata
import os
import subprocess
import sys

from slot import ROOT

WHEELS_DIR = ".whl"
CARRY_LIMIT = 64 * 2 ** 20
# Not in the slot's image (KINDS.md's package list): keras and its needs.
WHEELS = ("keras", "namex", "optree")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def installed_version(name):
  try:
    return metadata.version(name)
  except metadata.PackageNotFoundError:
    return None


def download_wheels(folder, python_version="3.12"):
  """pip download, as the device README says, of WHEELS at the versions
  installed here (the ones the CPU tests ran)."""
  os.makedirs(folder, exist_ok=True)
  specs = []
  for name in WHEELS:
    version = installed_version(name)
    specs.append(f"{name}=={version}" if version else name)
  have = os.listdir(folder)
  missing = [s for s in specs if not any(
      w.lower().startswith(s.replace("==", "-").lower() + "-") for w in have)]
  if not missing:
    print(f"{folder}/ already holds {', '.join(specs)}")
    return
  command = [sys.executable, "-m", "pip", "download", "--no-deps",
             "--only-binary=:all:", "--python-version", python_version,
             "--implementation", "cp", "-d", folder]
  for platform in PLATFORMS:
    command += ["--platform", platform]
  print(" ".join(command + missing), flush=True)
  subprocess.run(command + missing, check=True)


def carried_bytes(paths):
  """What a run carries: the tracked and untracked-not-ignored files, plus
  the carried folders."""
  listed = subprocess.run(
      ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
      cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
  total = sum(os.path.getsize(os.path.join(ROOT, p.decode()))
              for p in listed if p and os.path.isfile(
                  os.path.join(ROOT, p.decode())))
  for path in paths:
    for base, _, files in os.walk(os.path.join(ROOT, path)):
      total += sum(os.path.getsize(os.path.join(base, f)) for f in files)
  return total
