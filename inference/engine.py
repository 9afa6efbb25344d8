"""An inference engine under the places that only run the model forward
(fine-tuning's evaluation and --do-predict, run_scoring.py, the export).

`Engine(engine, precision)` says, for a workload of so many rows, whether
the engine runs it, and wraps a model's forward (a Python function of a
features dict, as its tf.function would take) in an `EngineFunction`: the
function compiled once per input signature (the shape bucket: dynamic
dims as None), cached for the run. TensorFlow stays the reference:
engine "tensorflow" never compiles.
"""

import numpy as np
import tensorflow as tf

from inference.choices import AUTO_MIN_ROWS
from inference.choices import ENGINES
from inference.choices import resolve_precision


class EngineFunction:
  """fn(features) -> outputs (NumPy), compiled per input signature.

  `dynamic`: "batch" (the leading dim varies: fine-tuning, whose rows are
  padded to max_seq_length) or "all" (every dim: scoring's batches of
  rounded widths and position counts)."""

  def __init__(self, fn, precision, dynamic="batch"):
    self._fn = tf.function(fn, autograph=False)
    self.precision = precision
    self._dynamic = dynamic
    self._compiled = {}  # input signature -> openvino_engine.CompiledFunction

  def _signature(self, features):
    def dims(shape):
      if self._dynamic == "all":
        return (None,) * len(shape)
      return (None,) + tuple(shape[1:])
    return tuple(sorted((k, np.dtype(v.dtype).name, dims(np.shape(v)))
                        for k, v in features.items()))

  def compiled(self, features):
    """The CompiledFunction for these features' signature (made once)."""
    from inference import openvino_engine
    key = self._signature(features)
    found = self._compiled.get(key)
    if found is None:
      specs = {k: tf.TensorSpec(shape, dtype, name=k)
               for k, dtype, shape in key}
      found = openvino_engine.CompiledFunction(
          self._fn.get_concrete_function(specs), self.precision)
      self._compiled[key] = found
    return found

  def __call__(self, features):
    features = {k: np.asarray(v) for k, v in features.items()}
    return self.compiled(features)(features)


class Engine:
  """The run's choice: engine (ENGINES) and precision (auto, float32,
  bfloat16), resolved once."""

  def __init__(self, engine="auto", precision="auto"):
    if engine not in ENGINES:
      raise ValueError(f"unknown inference engine {engine}")
    self.engine = engine
    self.precision = resolve_precision(precision)

  def runs(self, rows):
    """Whether the engine (not TensorFlow) runs a workload of `rows`."""
    if self.engine == "auto":
      return rows >= AUTO_MIN_ROWS
    return self.engine != "tensorflow"

  def wrap(self, fn, dynamic="batch"):
    return EngineFunction(fn, self.precision, dynamic)

  def describe(self, rows):
    return (f"OpenVINO, {self.precision}" if self.runs(rows) else
            "TensorFlow")
