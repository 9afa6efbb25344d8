"""OpenVINO graph rewrites for our encoder's converted graph.

OpenVINO's own fusions know the LayerNorm and GELU forms of PyTorch
exports; ours (model/encoder.py, keras.ops) arrive in other forms and
would run as a dozen element-wise kernels each. These passes put back the
one op each is: MVN (then * gamma) and Gelu(erf), which the CPU plugin
fuses into the matmuls around them. Same arithmetic to float32 rounding.
"""

import numpy as np
from openvino import opset13 as ops
from openvino.passes import AnyInput
from openvino.passes import Manager
from openvino.passes import Matcher
from openvino.passes import MatcherPass
from openvino.passes import WrapType

SQRT_HALF = float(np.sqrt(0.5))


def _constant(output):
  """The value of a Constant output, else None."""
  node = output.get_node()
  if node.get_type_name() != "Constant":
    return None
  return np.asarray(node.get_data())


def _scalar(output, value, tolerance=1e-6):
  data = _constant(output)
  return (data is not None and data.size == 1 and
          abs(float(data.reshape(())) - value) <= tolerance)


def _last_axis(output, rank):
  data = _constant(output)
  return (data is not None and data.size == 1 and
          int(data.reshape(())) in (-1, rank - 1))


def _other(node, known):
  """The input of a two-input node that is not `known` (an Output)."""
  a, b = (i.get_source_output() for i in node.inputs())
  return b if a == known else a if b == known else None


class LayerNormFusion(MatcherPass):
  """centered = x - mean(x); var = mean(centered * centered);
  centered * (rsqrt(var + eps) * gamma) -> MVN(x, eps inside sqrt) * gamma
  (LayerNorm's form in model/encoder.py)."""

  def __init__(self):
    super().__init__()
    x = AnyInput()
    mean = WrapType("opset1.ReduceMean", [x, AnyInput()])
    centered = WrapType("opset1.Subtract", [x, mean])
    square = WrapType("opset1.Multiply", [centered, centered])
    variance = WrapType("opset1.ReduceMean", [square, AnyInput()])
    plus_eps = WrapType("opset1.Add", [variance, AnyInput()])
    rsqrt = WrapType("opset1.Power", [plus_eps, AnyInput()])
    scale = WrapType("opset1.Multiply", [rsqrt, AnyInput()])
    root = WrapType("opset1.Multiply", [centered, scale])

    def callback(matcher):
      found = matcher.get_pattern_value_map()
      x_out = found[x]
      rank = x_out.get_partial_shape().rank
      if rank.is_dynamic:
        return False
      rank = rank.get_length()
      eps = _constant(_other(found[plus_eps].get_node(), found[variance]))
      power = found[rsqrt].get_node().input(1).get_source_output()
      gamma = _other(found[scale].get_node(), found[rsqrt])
      if (eps is None or eps.size != 1 or not _scalar(power, -0.5) or
          gamma is None or
          not _last_axis(found[mean].get_node().input(1).get_source_output(),
                         rank) or
          not _last_axis(
              found[variance].get_node().input(1).get_source_output(),
              rank)):
        return False
      root_node = found[root].get_node()
      mvn = ops.mvn(x_out, ops.constant(np.array([-1], np.int64)), True,
                    float(eps.reshape(())), "inside_sqrt")
      out = ops.multiply(mvn, gamma)
      out.set_friendly_name(root_node.get_friendly_name())
      root_node.output(0).replace(out.output(0))
      return True

    self.register_matcher(Matcher(root, "ElectraLayerNormFusion"), callback)


def _erfc_argument(node):
  """x of x * -sqrt(1/2) or of (-x) * sqrt(1/2) (the frontend folds the
  negation into the constant or not), else None."""
  inputs = [i.get_source_output() for i in node.inputs()]
  for i, const in enumerate(inputs):
    other = inputs[1 - i]
    if _scalar(const, -SQRT_HALF):
      return other
    if (_scalar(const, SQRT_HALF) and
        other.get_node().get_type_name() == "Negative"):
      return other.get_node().input(0).get_source_output()
  return None


class GeluErfcFusion(MatcherPass):
  """(0.5 * x) * (1 - erf(x * -sqrt(1/2))) (TensorFlow's exact GELU, as
  erfc) -> Gelu(x, erf)."""

  def __init__(self):
    super().__init__()
    x = AnyInput()
    half = WrapType("opset1.Multiply", [AnyInput(), AnyInput()])
    scaled = WrapType("opset1.Multiply", [AnyInput(), AnyInput()])
    erf = WrapType("opset1.Erf", [scaled])
    erfc = WrapType("opset1.Subtract", [AnyInput(), erf])
    root = WrapType("opset1.Multiply", [half, erfc])
    del x

    def callback(matcher):
      found = matcher.get_pattern_value_map()
      one = found[erfc].get_node().input(0).get_source_output()
      if not _scalar(one, 1.0):
        return False
      value = _erfc_argument(found[scaled].get_node())
      if value is None:
        return False
      halves = [i.get_source_output() for i in found[half].get_node()
                .inputs()]
      if not ((halves[0] == value and _scalar(halves[1], 0.5)) or
              (halves[1] == value and _scalar(halves[0], 0.5))):
        return False
      root_node = found[root].get_node()
      gelu = ops.gelu(value, "erf")
      gelu.set_friendly_name(root_node.get_friendly_name())
      root_node.output(0).replace(gelu.output(0))
      return True

    self.register_matcher(Matcher(root, "ElectraGeluErfcFusion"), callback)


def fuse(model):
  """`model` (an openvino.Model) with our LayerNorms and GELUs fused, in
  place; returns it."""
  manager = Manager()
  manager.register_pass(LayerNormFusion())
  manager.register_pass(GeluErfcFusion())
  manager.run_passes(model)
  return model
