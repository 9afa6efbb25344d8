"""Our model's forward, compiled by OpenVINO: a tf.function's concrete
function written as a GraphDef and read by OpenVINO's TensorFlow frontend,
its weights made constants, our LayerNorm, GELU and attention fused
(fusions.py), compiled for the CPU at a precision hint.

The weights: a function traced statelessly (its variables' values as
inputs, `weights_graph`) has them put in as constants on OpenVINO's side,
~5x faster than TensorFlow's freezing (convert_variables_to_constants_v2,
half of a Small model's whole conversion), which `frozen_graph` still does
for a function that reads its variables."""

import atexit
import collections
import copy
import gc
import os
import tempfile
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import convert_to_constants

from inference import fusions

HINTS = {"float32": "f32", "bfloat16": "bf16"}


def _core():
  import openvino as ov
  global _CORE
  if _CORE is None:
    _CORE = ov.Core()
    atexit.register(_release_all)
  return _CORE


_CORE = None
_LIVE = weakref.WeakSet()  # every CompiledFunction not yet freed


def _release_all():
  """At exit, frees every compiled model, then the Core, while the
  interpreter is whole: one left to Python's teardown (or never freed)
  meets OpenVINO's static executors' destruction at exit(), a candidate
  cause (not reproduced on demand) of the abort that once ended a finished
  run_scoring.py ("terminate called without an active exception")."""
  global _CORE
  for function in list(_LIVE):
    function.release()
  _CORE = None
  gc.collect()


def frozen_graph(concrete):
  """(GraphDef, input names, output names) of a concrete function with its
  variables as constants."""
  frozen = convert_to_constants.convert_variables_to_constants_v2(concrete)
  inputs = [t.name.split(":")[0] for t in frozen.inputs
            if t.dtype != tf.resource]
  return frozen.graph.as_graph_def(), inputs, [t.name for t in
                                               frozen.outputs]


def weights_graph(concrete):
  """(GraphDef, input names, output names, {name: value} of the tensors
  it captures) of a concrete function that captures no variable (its
  weights come as inputs)."""
  if any(t.dtype == tf.resource for t in concrete.inputs):
    raise ValueError("the function reads variables: freeze it instead")
  names = [t.name.split(":")[0] for t in concrete.inputs]
  captured = concrete.captured_inputs  # the last inputs, e.g. a constant
  return (concrete.graph.as_graph_def(), names,
          [t.name for t in concrete.outputs],
          {name: value.numpy() for name, value in zip(
              names[len(names) - len(captured):], captured)})


def _set_constants(model, constants):
  """Replaces the model's Parameters named in `constants` by Constants of
  those values."""
  from openvino import opset13 as ov_ops
  for param in list(model.get_parameters()):
    name = next((n.split(":")[0] for n in param.output(0).get_names()
                 if n.split(":")[0] in constants), None)
    if name is None:
      continue
    value = ov_ops.constant(np.ascontiguousarray(constants[name]))
    param.output(0).replace(value.output(0))
    model.remove_parameter(param)


def _row_slices(values, count):
  """Up to `count` slices splitting the rows of a features dict (all
  arrays rows first) evenly; [None] (the whole) if it has one row."""
  rows = len(next(iter(values.values()))) if values else 0
  if rows < 2:
    return [None]
  edges = np.linspace(0, rows, min(count, rows) + 1).astype(int)
  return [slice(a, b) for a, b in zip(edges[:-1], edges[1:])]


def _behind_identities(graph_def, tensor):
  """The node that output `tensor` is, through Identity nodes."""
  nodes = {n.name: n for n in graph_def.node}
  name = tensor.split(":")[0]
  while nodes[name].op == "Identity":
    name = nodes[name].input[0].split(":")[0]
  return name


def _bitcast_sign(node):
  """TensorFlow's Bitcast float32 -> int32, which OpenVINO has no op for.
  Keras' argmax uses it only for signbit (the sign bit alone): INT_MIN
  for x < 0, 1 for other non-zero x, 0 for 0 (-0.0 reads as +0.0)."""
  from openvino import opset13 as ov_ops
  x = node.get_input(0)
  if str(x.get_element_type()) != "<Type: 'float32'>":
    raise ValueError(f"Bitcast of {x.get_element_type()} is not supported")
  zero = ov_ops.constant(np.float32(0))
  value = ov_ops.select(
      ov_ops.less(x, zero), ov_ops.constant(np.int32(np.iinfo(np.int32).min)),
      ov_ops.convert(ov_ops.not_equal(x, zero), "i32"))
  return [value.output(0)]


def read_model(graph_def, constants=None):
  """The openvino.Model of a GraphDef, the inputs named in `constants`
  ({name: array}) made constants, fused. A file, not the Python object:
  the frontend reads a file in C++, ~3x faster than walking the object
  node by node."""
  from openvino.frontend import ConversionExtension
  from openvino.frontend import FrontEndManager
  with tempfile.TemporaryDirectory(prefix="ov_convert_") as folder:
    path = os.path.join(folder, "model.pb")
    with open(path, "wb") as f:
      f.write(graph_def.SerializeToString())
    frontend = FrontEndManager().load_by_framework("tf")
    frontend.add_extension(ConversionExtension("Bitcast", _bitcast_sign))
    model = frontend.convert(frontend.load(path))
  if constants:
    _set_constants(model, constants)
  return fusions.fuse(model)


def compile_model(model, precision, throughput=False):
  """A CompiledModel for the CPU; precision float32 or bfloat16.
  throughput: OpenVINO's THROUGHPUT hint (the cores split into streams
  that each run one batch; for many batches at once, CompiledFunction.map)
  instead of LATENCY (all cores on each call)."""
  return _core().compile_model(model, "CPU", {
      "INFERENCE_PRECISION_HINT": HINTS[precision],
      "PERFORMANCE_HINT": "THROUGHPUT" if throughput else "LATENCY"})


class CompiledFunction:
  """fn(features dict of arrays) -> the concrete function's outputs (its
  structure, NumPy arrays), run by an OpenVINO CompiledModel.

  `weights`: {input name: value} of a stateless concrete function's weight
  inputs (weights_graph), made constants; None: the function reads its
  variables, and is frozen. A stateless one keeps its converted model
  (weights still inputs): `with_weights` compiles it with other weights
  of the same shapes (a later trial's) with no trace or conversion.
  `throughput`: compiled for `map` (streams side by side); a single call
  then runs on one stream's share of the cores."""

  def __init__(self, concrete, precision, weights=None, throughput=False):
    self._precision = precision
    self._throughput = throughput
    self._template = None
    if weights is None:
      graph_def, self._inputs, self._names = frozen_graph(concrete)
      model = read_model(graph_def)
    else:
      graph_def, inputs, self._names, captured = weights_graph(concrete)
      self._inputs = [name for name in inputs
                      if name not in weights and name not in captured]
      self._template = read_model(graph_def, captured)
      model = self._weighted(weights)
    # What each output is behind Identity nodes (an input passed through
    # has no Result): found now, so the GraphDef (a frozen one holds every
    # weight) is not kept.
    self._behind = {name: _behind_identities(graph_def, name)
                    for name in self._names}
    self._structure = concrete.structured_outputs
    self._compile(model)
    _LIVE.add(self)

  def with_weights(self, weights):
    """A CompiledFunction of the same function with other weights."""
    if self._template is None:
      raise ValueError("a frozen function has no weights to replace")
    other = copy.copy(self)
    other._compile(self._weighted(weights))  # pylint: disable=W0212
    _LIVE.add(other)
    return other

  def _weighted(self, weights):
    """The converted model with `weights` put in as constants."""
    model = self._template.clone()
    _set_constants(model, weights)
    return model

  def release(self):
    """Frees the compiled model (its weights); with_weights still works."""
    self._compiled = self._request = self._outputs = self._ports = None

  def _compile(self, model):
    # Inputs and outputs by name (the frontend keeps TF's tensor names).
    by_name = {name.split(":")[0]: i for i, port in enumerate(model.inputs)
               for name in port.get_names()}
    self._feed = [(name, by_name[name]) for name in self._inputs
                  if name in by_name]  # an unused input is pruned
    ports = {name: port for port in model.outputs
             for name in port.get_names()}
    self._compiled = compile_model(model, self._precision, self._throughput)
    # An output that is an input passed through (SQuAD's example_index)
    # has no Result: it is copied from the features.
    self._outputs = [
        self._compiled.output(ports[name].get_any_name()) if name in ports
        else self._passed_input(name) for name in self._names]
    self._ports = [port for port in self._outputs
                   if not isinstance(port, str)]  # those computed
    self._request = self._compiled.create_infer_request()

  def _passed_input(self, output):
    if self._behind[output] not in self._inputs:
      raise ValueError(f"output {output} is not in the converted model")
    return self._behind[output]

  def __call__(self, features):
    values = self._values(features)
    result = self._request.infer(self._fed(values))
    return self._pack(values, [np.array(result[port])
                               for port in self._ports])

  def map(self, batches):
    """Yields the outputs of each features dict of `batches` (rows first,
    as every output), in order, as many batches in flight as the compiled
    model has streams; the last `streams` batches are split across the
    streams (the longest of length-sorted batches; a lone batch would
    otherwise run on one stream's share of the cores).

    Plain requests, waited on here: no completion callback, so no Python
    runs on OpenVINO's threads. A callback there (AsyncInferQueue's) can
    run Python's garbage collector on them, and an OpenVINO object it
    frees then joins its own thread ("Resource deadlock avoided"): a
    candidate cause of the two aborts that ended BLiMP jobs in CI (the
    other candidate: openvino's telemetry fork, no_telemetry.py)."""
    streams = self._compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS")
    # This call's own requests (a generator left suspended keeps its own).
    idle = collections.deque(self._compiled.create_infer_request()
                             for _ in range(streams))
    batches = [self._values(features) for features in batches]
    # A batch's row slices (None: whole): the last `streams` batches are
    # split, so that the streams finish together.
    parts = [[None] if i < len(batches) - streams or streams < 2 else
             _row_slices(values, streams) for i, values in enumerate(batches)]
    done = {}  # (batch, part) -> its outputs, copied off the request
    in_flight = collections.deque()  # (request, (batch, part)), as started

    def collect():
      """Copies off the oldest request's outputs (waited for)."""
      request, key = in_flight.popleft()
      request.wait()
      done[key] = [np.array(request.get_tensor(port).data)
                   for port in self._ports]
      idle.append(request)

    def ready(i):
      return all((i, j) in done for j in range(len(parts[i])))

    def outputs(i):
      pieces = [done.pop((i, j)) for j in range(len(parts[i]))]
      return self._pack(batches[i], [np.concatenate(o) for o in
                                     zip(*pieces)])
    yielded = 0
    try:
      for i, values in enumerate(batches):
        for j, rows in enumerate(parts[i]):
          part = values if rows is None else {
              name: value[rows] for name, value in values.items()}
          if not idle:
            collect()
          request = idle.popleft()
          request.start_async(self._fed(part))  # copies the inputs
          in_flight.append((request, (i, j)))
        while yielded < i and ready(yielded):
          yield outputs(yielded)
          yielded += 1
      while in_flight:
        collect()
      for i in range(yielded, len(batches)):
        yield outputs(i)
    finally:  # a caller that stops early leaves no request running
      for request, _ in in_flight:
        request.wait()

  def _values(self, features):
    return {name: np.asarray(features[name]) for name in self._inputs}

  def _fed(self, values):
    return {index: values[name] for name, index in self._feed}

  def _pack(self, values, computed):
    """The function's outputs: `computed` (the compiled outputs' values,
    in order) with the inputs passed through put back."""
    computed = iter(computed)
    flat = [values[port] if isinstance(port, str) else next(computed)
            for port in self._outputs]
    return tf.nest.pack_sequence_as(self._structure, flat)
