"""One dataclass config per script, overridable by JSON hparams and flags.

Precedence (later wins): dataclass defaults < each `--hparams` (a JSON file
or a JSON string, in the order given) < explicit `--some-field` flags.
Unknown keys are a UserError that names the key.
"""

import argparse
import dataclasses
import difflib
import inspect
import json
import math
import os
import re
import types
import typing

from util import storage
from util.errors import UserError


def _base_type(tp):
  """Strips Optional[...] / `X | None` to X."""
  origin = typing.get_origin(tp)
  if origin in (typing.Union, types.UnionType):
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if len(args) == 1:
      return args[0]
  return tp


def _field_types(cls):
  hints = typing.get_type_hints(cls)
  return {f.name: _base_type(hints[f.name]) for f in dataclasses.fields(cls)}


class DuplicateKey(ValueError):
  """A JSON object names a key twice (json.loads would keep the last)."""


def _short_json(value, limit=30):
  text = json.dumps(value)
  return text if len(text) <= limit else text[:limit - 3] + "..."


def _no_duplicates(pairs):
  seen = {}
  for key, value in pairs:
    if key in seen:
      raise DuplicateKey(f"names '{key}' twice ({_short_json(seen[key])}, "
                         f"then {_short_json(value)}); keep one")
    seen[key] = value
  return seen


def loads_strict(text):
  """json.loads, but a key named twice in an object is DuplicateKey: the
  silent last-one-wins hides a typo'd or stale setting."""
  return json.loads(text, object_pairs_hook=_no_duplicates)


def coerce(name, tp, value):
  """Checks/converts a JSON or flag value to the field's type."""
  if value is None:
    return None
  origin = typing.get_origin(tp) or tp
  try:
    if tp is bool:
      if isinstance(value, bool):
        return value
      if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        return value.lower() in ("true", "1")
      raise ValueError
    if tp is int:
      if isinstance(value, bool) or (isinstance(value, float) and
                                     not value.is_integer()):
        raise ValueError
      return int(value)
    if tp is float:
      if isinstance(value, bool):
        raise ValueError
      value = float(value)
      if not math.isfinite(value):  # NaN passes every `> 0` check
        raise UserError(f"hparam '{name}' must be a finite number, got "
                        f"{value}")
      return value
    if tp is str:
      if not isinstance(value, str):
        raise ValueError
      return value
    if origin in (dict, list, tuple):
      if isinstance(value, str):
        value = loads_strict(value)
      if not isinstance(value, (dict if origin is dict else (list, tuple))):
        raise ValueError
      return origin(value) if origin is not tuple else tuple(value)
  except DuplicateKey as e:
    raise UserError(f"hparam '{name}' {e}") from None
  except (ValueError, TypeError, json.JSONDecodeError):
    raise UserError(f"hparam '{name}' expects {getattr(tp, '__name__', tp)}, "
                    f"got {value!r}") from None
  return value


# Seeds: what np.random.seed (keras.utils.set_random_seed) and
# keras.random.SeedGenerator accept on both backends, 0 <= seed < 2**32.
SEED_RANGE = "[0, 4294967296)"

_RANGE = re.compile(r"^(?:(>=|>) *(\S+)|([\[(]) *(\S+), *(\S+) *([\])]))$")


def in_range(value, spec):
  """Whether number `value` is within `spec`: "> 0", ">= 1", "[0, 1)"."""
  match = _RANGE.match(spec)
  if not match:
    raise ValueError(f"bad range spec {spec!r}")
  op, low, left, lo, hi, right = match.groups()
  if op:
    return value > float(low) if op == ">" else value >= float(low)
  return ((value >= float(lo) if left == "[" else value > float(lo)) and
          (value <= float(hi) if right == "]" else value < float(hi)))


def numeric_fields(cls):
  """Names of a config class's int and float fields (not bools)."""
  return [name for name, tp in _field_types(cls).items()
          if tp in (int, float)]


def check_numbers(config, source=""):
  """Every number of `config` finite and within the range its class's
  RANGES gives ({field: spec or None for any value}; None values are
  "use the default" and pass). The one place numeric hparams are checked,
  before any work, so NaN or a beta of 1.5 never starts a run."""
  ranges = getattr(type(config), "RANGES", {})
  prefix = f"{source}: " if source else ""
  for name in numeric_fields(type(config)):
    value = getattr(config, name)
    if value is None or isinstance(value, bool):
      continue
    if not math.isfinite(value):
      raise UserError(f"{prefix}hparam '{name}' must be a finite number, "
                      f"got {value}")
    spec = ranges.get(name)
    if spec and not in_range(value, spec):
      words = spec if spec[0] == ">" else f"in {spec}"
      shown = f"{value:.10g}" if isinstance(value, float) else value
      raise UserError(f"{prefix}hparam '{name}' must be {words}, got "
                      f"{shown}")


def original_switches(overrides, table):
  """`overrides` with another release's switches ({name: on -> {field:
  value}}, applied in the table's order) replaced by the fields they set;
  fields given directly win. A config's original_spellings uses it."""
  mapped = {}
  for name, to_fields in table.items():
    if name in overrides:
      mapped.update(to_fields(coerce(name, bool, overrides[name])))
  rest = {k: v for k, v in overrides.items() if k not in table}
  return dict(mapped, **rest)


def check_tpu_name(config):
  """strategy tpu (the original's use_tpu) names its TPU: --tpu-name, or
  TPU_NAME in the environment (a TPU VM's "local"); said before
  TensorFlow loads, not as "cannot reach TPU ''" a minute later. (Under
  KERAS_BACKEND=jax the JAX path refuses strategy tpu itself.)"""
  if (config.strategy == "tpu" and not config.tpu_name and
      not os.environ.get("TPU_NAME") and
      os.environ.get("KERAS_BACKEND") != "jax"):
    raise UserError("strategy tpu (use_tpu) needs --tpu-name: the Cloud "
                    "TPU's name, or local on a TPU VM")


def _unknown_key(key, known, cls):
  """The "did you mean" of an unknown hparam, as parse_args gives one for
  a flag (a flag's spelling, --learning-rate or learning-rate, is matched
  too)."""
  name = str(key)
  plain = name.lstrip("-").replace("-", "_")
  if plain in known:
    return f"did you mean '{plain}'?"
  close = difflib.get_close_matches(plain, list(known), n=1)
  if close:
    return f"did you mean '{close[0]}'?"
  return (f"known: see {cls.__name__} in the script's config module, or "
          "--help")


def apply_overrides(config, overrides, source="hparams"):
  """Returns a copy of `config` with `overrides` (a dict) applied."""
  if not isinstance(overrides, dict):
    raise UserError(f"{source} must be a JSON object, got {overrides!r}")
  spellings = getattr(type(config), "original_spellings", None)
  if spellings is not None:  # another release's names for the same fields
    overrides = spellings(overrides)
  types_ = _field_types(type(config))
  unknown = [k for k in overrides if k not in types_]
  if unknown:
    hint = _unknown_key(unknown[0], types_, type(config))
    raise UserError(f"unknown hparam '{unknown[0]}' in {source}; {hint}")
  values = {k: coerce(k, types_[k], v) for k, v in overrides.items()}
  return dataclasses.replace(config, **values)


def load_hparams(spec, flag="--hparams"):
  """`spec` is a path to a JSON file or a JSON string (given as `flag`);
  returns a dict."""
  text, where = spec.strip(), flag
  if not text:
    raise UserError(f"{flag} is empty: pass a JSON object or a file")
  if not text.startswith("{") and storage.exists(text):
    where = f"{flag} file {text}"
    if storage.isdir(text):
      raise UserError(f"{where} is a folder, not a JSON file")
    try:
      text = storage.read_text(text)
    except UnicodeDecodeError:
      raise UserError(f"{where} is not UTF-8 text") from None
    except OSError as e:
      raise UserError(f"cannot read {where}: {e.strerror or e}") from None
  try:
    value = loads_strict(text)
  except json.JSONDecodeError as e:
    if where == flag and not text.startswith(("{", "[", '"')):
      raise UserError(f"{flag} file not found: {spec}") from None
    at = (f"char {e.pos}" if where == flag else
          f"line {e.lineno} column {e.colno}")
    raise UserError(f"{where} is not valid JSON ({e.msg} at {at})") from None
  except DuplicateKey as e:
    raise UserError(f"{where} {e}") from None
  except (ValueError, RecursionError) as e:  # huge numbers, deep nesting
    raise UserError(f"{where} is not usable JSON ({str(e)[:80]})") from None
  if not isinstance(value, dict):
    kinds = {list: "list", str: "string", int: "number", float: "number",
             bool: "boolean", type(None): "null"}
    shown = json.dumps(value)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise UserError(f"{where} is JSON but not an object: {shown} (a "
                    f"{kinds.get(type(value), 'value')}; pass "
                    '{"name": value, ...})')
  return value


def _field_comments(cls):
  """`name: type = default  # comment` lines of the dataclass -> comments."""
  try:
    source = inspect.getsource(cls)
  except (OSError, TypeError):
    return {}
  return dict(re.findall(r"^\s+(\w+): [^=\n]+=[^#\n]*#\s*(.+)$", source,
                         flags=re.M))


def add_config_flags(parser, cls, skip=()):
  """Adds `--field-name` for every dataclass field (bools as --x/--no-x)."""
  comments = _field_comments(cls)
  defaults = {f.name: f.default for f in dataclasses.fields(cls)}
  for name, tp in _field_types(cls).items():
    if name in skip:
      continue
    flag = "--" + name.replace("_", "-")
    default = defaults[name]
    help_text = comments.get(name, "")
    if default is not dataclasses.MISSING and default not in ("", None):
      help_text = f"{help_text} (default: {default})".strip()
    kwargs = dict(dest=name, default=argparse.SUPPRESS,
                  help=help_text.replace("%", "%%") or None)
    if tp is bool:
      parser.add_argument(flag, action=argparse.BooleanOptionalAction,
                          **kwargs)
    else:
      origin = typing.get_origin(tp) or tp
      metavar = "JSON" if origin in (dict, list, tuple) else name.upper()
      parser.add_argument(flag, type=str, metavar=metavar, **kwargs)


class ArgumentParser(argparse.ArgumentParser):
  """No abbreviated flags; a bad command line is one UserError line (the
  script's main_guard prints it), not a usage dump."""

  def __init__(self, *args, **kwargs):
    kwargs["allow_abbrev"] = False
    super().__init__(*args, **kwargs)

  def error(self, message):
    raise UserError(message)


def parse_args(parser, argv=None):
  """parser.parse_args, but an unknown flag is one line naming the closest
  known one: "unknown flag --num-train-step; did you mean
  --num-train-steps?"."""
  args, extra = parser.parse_known_args(argv)
  if extra:
    first = extra[0]
    if not first.startswith("-"):
      raise UserError(f"unexpected argument {first!r} (flags are "
                      "--name value)")
    name = first.split("=", 1)[0]
    known = [f for action in parser._actions for f in action.option_strings  # pylint: disable=protected-access
             if f.startswith("--")]
    close = difflib.get_close_matches(name, known, n=1)
    hint = (f"; did you mean {close[0]}?" if close else
            "; --help lists the flags")
    raise UserError(f"unknown flag {name}{hint}")
  return args


def parse_config(cls, argv=None, description=None, parser=None,
                 hparams_flag=True, defaults=None, check_first=None):
  """Builds a `cls` from defaults, `--hparams` and flags; check_first(config)
  runs before its validate() (e.g. a cheap path check before one that
  imports TensorFlow).

  Returns (config, args) so a script can read its extra arguments.
  """
  parser = parser or ArgumentParser(description=description)
  # A prefix of a flag is an unknown flag, never the flag it begins.
  parser.allow_abbrev = False
  if not isinstance(parser, ArgumentParser):
    parser.error = ArgumentParser.error.__get__(parser)
  if hparams_flag:
    parser.add_argument(
        "--hparams", action="append", default=[], metavar="JSON_OR_FILE",
        help="JSON string or file of hparams; repeatable, later ones win")
  add_config_flags(parser, cls)
  args = parse_args(parser, argv)
  config = cls(**(defaults or {}))
  for spec in getattr(args, "hparams", []):
    source = "--hparams " + (spec if not spec.strip().startswith("{")
                             else "JSON")
    config = apply_overrides(config, load_hparams(spec), source)
  flag_values = {f.name: getattr(args, f.name)
                 for f in dataclasses.fields(cls) if hasattr(args, f.name)}
  config = apply_overrides(config, flag_values, "flags")
  if check_first is not None:
    check_first(config)
  if hasattr(config, "validate"):
    config.validate()  # the configs' own call check_numbers first
  check_numbers(config)
  return config, args


def model_path(config):
  """The pretrained model a script reads: --init-checkpoint, else
  DATA_DIR/models/NAME ("" when neither is given)."""
  if config.init_checkpoint:
    return config.init_checkpoint
  if config.data_dir and config.model_name:
    return os.path.join(config.data_dir, "models", config.model_name)
  return ""


def require_model_path(config):
  """model_path(config), or one clear error when neither is given."""
  path = model_path(config)
  if not path:
    raise UserError("no model: pass --data-dir and --model-name (or "
                    "--init-checkpoint)")
  return path


def check_data_dir(config):
  """A --data-dir (or --init-checkpoint) that is not there, said before
  TensorFlow loads (which takes seconds) and before anything is written."""
  path = getattr(config, "data_dir", "")
  if path and not storage.isdir(path):
    what = ("is a file, not a folder" if storage.exists(path) else
            "does not exist")
    raise UserError(f"data_dir {path} {what}")
  path = getattr(config, "init_checkpoint", "")
  # A checkpoint prefix (DIR/ckpt-20) names files that start with it.
  if path and not storage.exists(path) and not storage.exists(
      path + ".index"):
    raise UserError(f"init_checkpoint {path} does not exist")


def check_folder(path, name):
  """One error naming what `path` is when it is not a folder."""
  if storage.exists(path) and not storage.isdir(path):
    raise UserError(f"{name} {path} is a file, not a folder")
  if not storage.isdir(path):
    raise UserError(f"{name} not found: {path}")


def check_choice(name, value, choices, note=""):
  """One clear error unless `value` is one of `choices`."""
  if value not in choices:
    raise UserError(f"{name} must be one of {', '.join(choices)}{note}, got "
                    f"'{value}'")
