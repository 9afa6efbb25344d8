"""OpenVINO graph rewrites for our encoder's converted graph.

OpenVINO's own fusions know the LayerNorm and GELU forms of PyTorch
exports; ours (model/encoder.py, keras.ops) arrive in other forms and
would run as a dozen element-wise kernels each. These passes put back the
one op each is: MVN (then * gamma) and Gelu(erf), which the CPU plugin
fuses into the matmuls around them. Same arithmetic to float32 rounding.

Attention (einsum, scale, masked fill, softmax, einsum: Keras' form)
becomes one ScaledDotProductAttention, which the CPU plugin runs as a
fused kernel, its mask the same fill added. An einsum left over becomes
Transpose + MatMul: OpenVINO's own Einsum decomposition broadcasts each
operand by multiplying it with a tensor of ones of its full shape (a
reference-kernel Broadcast, a Reorder and a Multiply per operand, ~15% of
Small's forward).
"""

import numpy as np

from inference import no_telemetry

no_telemetry.decline()  # before openvino's import sends its event

from openvino import opset13 as ops  # noqa: E402
from openvino.passes import AnyInput  # noqa: E402
from openvino.passes import Manager  # noqa: E402
from openvino.passes import Matcher  # noqa: E402
from openvino.passes import MatcherPass  # noqa: E402
from openvino.passes import WrapType  # noqa: E402

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


def _transposed(output, labels, order):
  """`output` (dims named by `labels`) with its dims in `order`."""
  perm = [labels.index(c) for c in order]
  if perm == sorted(perm):
    return output
  return ops.transpose(output, ops.constant(np.array(perm, np.int64))
                       ).output(0)


class EinsumMatMul(MatcherPass):
  """A two-operand Einsum that is a batched matmul (batch dims, one free
  dim per operand, one contracted dim; e.g. "btnh,bsnh->bnts") ->
  Transpose, MatMul(transpose_b), Transpose."""

  def __init__(self):
    super().__init__()
    root = WrapType("opset7.Einsum", [AnyInput(), AnyInput()])

    def callback(matcher):
      node = matcher.get_match_root()
      equation = node.get_attributes()["equation"].replace(" ", "")
      inputs, out = equation.split("->")
      terms = inputs.split(",")
      if "." in equation or len(terms) != 2:
        return False
      a, b = terms
      batch = [c for c in out if c in a and c in b]
      contracted = [c for c in a if c in b and c not in out]
      free_a = [c for c in a if c not in b]
      free_b = [c for c in b if c not in a]
      if (len(set(a)) != len(a) or len(set(b)) != len(b) or
          len(contracted) != 1 or len(free_a) != 1 or len(free_b) != 1 or
          sorted(out) != sorted(batch + free_a + free_b)):
        return False
      x, y = (i.get_source_output() for i in node.inputs())
      product = ops.matmul(_transposed(x, a, batch + free_a + contracted),
                           _transposed(y, b, batch + free_b + contracted),
                           False, True)
      result = _transposed(product.output(0), batch + free_a + free_b,
                           list(out))
      result.get_node().set_friendly_name(node.get_friendly_name())
      node.output(0).replace(result)
      return True

    self.register_matcher(Matcher(root, "ElectraEinsumMatMul"), callback)


def _equation(node, want):
  return (node.get_type_name() == "Einsum" and
          node.get_attributes()["equation"].replace(" ", "").lower() == want)


def _condition(output):
  """The mask a Select reads, without Keras' logical_and with a broadcast
  all-true tensor of the scores' shape (ops.where's broadcasting)."""
  node = output.get_node()
  if node.get_type_name() == "LogicalAnd":
    a, b = (i.get_source_output() for i in node.inputs())
    for ones, mask in ((a, b), (b, a)):
      if (ones.get_node().get_type_name() == "Broadcast" and
          _constant(ones.get_node().input(0).get_source_output()) is not None
          and np.all(_constant(ones.get_node().input(0).get_source_output()))):
        return mask
  return output


class AttentionFusion(MatcherPass):
  """einsum("bnts,bsnh->btnh", softmax(where(mask, einsum("btnh,bsnh->bnts",
  q, k) * scale, fill)), v) -> ScaledDotProductAttention over [B, N, T, H]
  with the float mask where(mask, 0, fill) added to the scores (the same
  probabilities: exp(fill - max) and exp(score + fill - max) are both 0)."""

  def __init__(self):
    super().__init__()
    scores = WrapType("opset7.Einsum", [AnyInput(), AnyInput()])
    scaled = WrapType("opset1.Multiply", [scores, AnyInput()])
    masked = WrapType("opset1.Select", [AnyInput(), scaled, AnyInput()])
    probs = WrapType(["opset1.Softmax", "opset8.Softmax"], [masked])
    root = WrapType("opset7.Einsum", [probs, AnyInput()])

    def callback(matcher):
      found = matcher.get_pattern_value_map()
      context, qk = found[root].get_node(), found[scores].get_node()
      select = found[masked].get_node()
      scale = _other(found[scaled].get_node(), found[scores])
      fill = _constant(select.input(2).get_source_output())
      softmax = found[probs].get_node()
      axis = softmax.get_attributes()["axis"]
      if (not _equation(qk, "btnh,bsnh->bnts") or
          not _equation(context, "bnts,bsnh->btnh") or axis not in (-1, 3) or
          scale is None or scale.get_partial_shape().is_dynamic or
          int(np.prod(scale.get_partial_shape().to_shape())) != 1 or
          fill is None or fill.size != 1 or float(fill.reshape(())) > -1e4):
        return False
      heads = ops.constant(np.array([0, 2, 1, 3], np.int64))
      q, k = (ops.transpose(i.get_source_output(), heads)
              for i in qk.inputs())
      v = ops.transpose(context.input(1).get_source_output(), heads)
      dtype = found[scores].get_element_type()
      mask = ops.select(_condition(select.input(0).get_source_output()),
                        ops.constant(np.float32(0)),
                        ops.constant(np.float32(fill.reshape(()))))
      if mask.get_output_element_type(0) != dtype:
        mask = ops.convert(mask, dtype)
      scale = ops.reshape(scale, ops.constant(np.array([], np.int64)), False)
      attention = ops.scaled_dot_product_attention(q, k, v, mask, scale)
      out = ops.transpose(attention, heads)
      out.set_friendly_name(context.get_friendly_name())
      context.output(0).replace(out.output(0))
      return True

    self.register_matcher(Matcher(root, "ElectraAttentionFusion"), callback)


def fuse(model):
  """`model` (an openvino.Model) with our LayerNorms, GELUs and attention
  fused, other einsums as matmuls, in place; returns it."""
  manager = Manager()
  manager.register_pass(LayerNormFusion())
  manager.register_pass(GeluErfcFusion())
  manager.register_pass(AttentionFusion())
  manager.register_pass(EinsumMatMul())
  manager.run_passes(model)
  return model
