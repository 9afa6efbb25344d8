"""An inference engine under the places that only run the model forward
(fine-tuning's evaluation and --do-predict, run_scoring.py, the export).

`Engine(engine, precision)` says, for a workload of so many rows, whether
the engine runs it, and wraps a model's forward (a Python function of a
features dict, as its tf.function would take) in an `EngineFunction`: the
function compiled once per input signature (the shape bucket: dynamic
dims as None), cached for the run. TensorFlow stays the reference:
engine "tensorflow" never compiles.

Padding trimmed: where a caller's outputs are per row (a classifier's,
a regression's, a span head's beam), `trim_by` names the padding mask, and
each batch runs at its longest row's length (at least `min_length`),
rounded up to TRIM_MULTIPLE, instead of max_seq_length: padded keys are
masked out of attention, so the rows' outputs are the same computation on
less padding.
"""

import keras
import numpy as np

from finetune import padding
from inference.choices import AUTO_MIN_ROWS
from inference.choices import ENGINES
from inference.choices import resolve_precision

# Trimmed lengths are rounded up to this. 1: the exact length, as the
# compiled model's length is dynamic anyway; on all of SST-2 dev (Small,
# AMD EPYC) that ran 4% faster than multiples of 8 (8.8% fewer tokens).
TRIM_MULTIPLE = 1


def trimmed_length(mask, min_length=1):
  """The length a batch of [B, T] padding mask runs at: its last column
  with any real token, rounded up to TRIM_MULTIPLE, at least min_length,
  at most T (fine-tuning's rule, finetune/padding.py)."""
  return padding.trimmed_length(mask, min_length, TRIM_MULTIPLE)


def _weight_name(i):
  """The traced input (and OpenVINO Parameter) of the i-th variable."""
  return f"engine_weight_{i}"


class EngineFunction:
  """fn(features) -> outputs (NumPy), compiled per input signature.

  `dynamic`: "batch" (the leading dim varies: fine-tuning, whose rows are
  padded to max_seq_length) or "all" (every dim: scoring's batches of
  rounded widths and position counts). `trim_by`: the [B, T] padding mask
  feature whose padding is cut (module docstring), or None; with it, the
  [B, T] features' length is dynamic too. `variables`: the Keras
  variables fn reads (a model's `variables`): traced as inputs, their
  values at compile time put in as constants (openvino_engine), instead
  of TensorFlow freezing them. `throughput`: compiled for `map` (many
  batches in flight, openvino_engine.compile_model), not single calls."""

  def __init__(self, fn, precision, dynamic="batch", trim_by=None,
               min_length=1, variables=None, throughput=False):
    # OpenVINO converts TensorFlow graphs; the JAX path imports this
    # module without TensorFlow.
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    self._variables = None if variables is None else list(variables)
    self._values = self._variables  # whose values are compiled in
    if self._variables is None:
      self._fn = tf.function(fn, autograph=False)
    else:
      def stateless(values, features):
        with keras.StatelessScope(
            state_mapping=list(zip(self._variables, values))):
          return fn(features)
      self._fn = tf.function(stateless, autograph=False)
    self.precision = precision
    self._dynamic = dynamic
    self._trim_by = trim_by
    self._min_length = min_length
    self._throughput = throughput
    self._compiled = {}  # input signature -> openvino_engine.CompiledFunction
    self._converted = {}  # input signature -> the first weights' compile

  def rebind(self, variables):
    """Compiles in the values of `variables` (another model of the same
    shapes: a later trial's) from now on, reusing the trace and conversion
    of each signature."""
    variables = list(variables)
    if self._variables is None or [tuple(v.shape) for v in variables] != [
        tuple(v.shape) for v in self._variables]:
      raise ValueError("rebind needs variables of the traced shapes")
    self._values = variables
    self._compiled = {}
    for converted in self._converted.values():
      converted.release()  # the earlier weights' compile

  def _weights(self):
    return {_weight_name(i): keras.ops.convert_to_numpy(v.value)
            for i, v in enumerate(self._values)}

  def _trimmed(self, features):
    """The features with every [B, T] one cut to the batch's length."""
    mask = features[self._trim_by]
    length = trimmed_length(mask, self._min_length)
    return {k: v[:, :length] if self._sequence(v, mask) else v
            for k, v in features.items()}

  def _sequence(self, value, mask):
    return value.ndim == 2 and value.shape == mask.shape

  def _signature(self, features):
    mask = features.get(self._trim_by)

    def dims(value):
      shape = np.shape(value)
      if self._dynamic == "all" or (mask is not None and
                                    self._sequence(value, mask)):
        return (None,) * len(shape)
      return (None,) + tuple(shape[1:])
    return tuple(sorted((k, np.dtype(v.dtype).name, dims(v))
                        for k, v in features.items()))

  def compiled(self, features):
    """The CompiledFunction for these features' signature (made once)."""
    from inference import openvino_engine
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    key = self._signature(features)
    found = self._compiled.get(key)
    if found is None and key in self._converted:
      found = self._compiled[key] = self._converted[key].with_weights(
          self._weights())
    if found is None:
      specs = {k: tf.TensorSpec(shape, dtype, name=k)
               for k, dtype, shape in key}
      if self._variables is None:
        found = openvino_engine.CompiledFunction(
            self._fn.get_concrete_function(specs), self.precision,
            throughput=self._throughput)
      else:
        found = openvino_engine.CompiledFunction(
            self._fn.get_concrete_function(
                [tf.TensorSpec(v.shape, v.dtype, name=_weight_name(i))
                 for i, v in enumerate(self._variables)], specs),
            self.precision, weights=self._weights(),
            throughput=self._throughput)
        self._converted[key] = found
      self._compiled[key] = found
    return found

  def __call__(self, features):
    features = self._prepared(features)
    return self.compiled(features)(features)

  def map(self, batches):
    """Yields fn's outputs on each features dict of `batches`, in order,
    several in flight (a run of batches of one signature at a time)."""
    run, compiled = [], None
    for features in batches:
      features = self._prepared(features)
      found = self.compiled(features)
      if found is not compiled and run:
        yield from compiled.map(run)
        run = []
      compiled = found
      run.append(features)
    if run:
      yield from compiled.map(run)

  def _prepared(self, features):
    features = {k: np.asarray(v) for k, v in features.items()}
    if self._trim_by is not None:
      features = self._trimmed(features)
    return features


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

  def wrap(self, fn, dynamic="batch", trim_by=None, min_length=1,
           variables=None, throughput=False):
    return EngineFunction(fn, self.precision, dynamic, trim_by, min_length,
                          variables, throughput)

  def describe(self, rows):
    return (f"OpenVINO, {self.precision}" if self.runs(rows) else
            "TensorFlow")
