"""The inference engine (OpenVINO) against the TensorFlow path, its
reference: fine-tuning's predictions (every GLUE dev example of the test
model, the SQuAD test questions), every PLL estimator, the fused graph."""

import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from inference.engine import Engine
from scoring import pll as scoring_pll
from scoring.pll import Scorer
from tests.finetuned_models import random_finetuned
from tests.shared_data import SHARED
from tests.tiny_runs import SENTENCES

FP32 = dict(rtol=1e-5, atol=1e-5)
# bfloat16 matmuls (8-bit mantissa) on O(1) random weights: probabilities
# within 0.05 (measured up to ~0.02); per-token PLLs (log-probabilities
# and energies, |value| up to ~5 nats) within 0.2 nats (measured up to
# ~0.06 on the tiny runs).
BF16 = dict(rtol=0.0, atol=0.05)
BF16_PLL = dict(rtol=0.0, atol=0.2)
# Appendix G (electra) normalises over the generator's top k, whose order
# bf16 can change: 0.5 nats per token (measured up to 0.25).
BF16_APPENDIX_G = dict(rtol=0.0, atol=0.5)


def predict(path, task_names, predict_file, tmp_path, engines, **values):
  """{(engine, precision): (scorer, loss)} of the fine-tuned model at `path`
  on `predict_file`, through FinetuningRunner's Predictor."""
  from configure_finetuning import FinetuningConfig
  from finetune.model import finetuned_model
  from finetune.trainer import FinetuningRunner
  values.setdefault("eval_batch_size", 64)
  config = FinetuningConfig(init_checkpoint=path, task_names=task_names,
                            do_predict=True, predict_file=predict_file,
                            output_dir=str(tmp_path / "out"), **values)
  runner = FinetuningRunner(config)
  task = runner.tasks[0]
  examples, labelled = task.read_file(predict_file)
  runner.data.add(task.name, "predict", examples,
                  task.featurize(examples, is_training=False))
  model = finetuned_model(runner.finetuned, runner.tasks)
  runner.predictor.call_once(model, task, "predict")
  out = {}
  for engine, precision in engines:
    runner.predictor.engine = Engine(engine, precision)
    out[engine, precision] = runner.predictor.predict(model, task, "predict")
  predict.runner = runner  # for a test to look into
  return out, len(examples)


def test_glue_dev_labels_identical_on_every_example(tmp_path):
  path = random_finetuned(tmp_path / "model", "sst")
  dev = os.path.join(SHARED, "glue", "SST-2", "dev.tsv")
  got, n = predict(path, "sst", dev, tmp_path, [
      ("tensorflow", "float32"), ("openvino", "float32"),
      ("openvino", "bfloat16")])
  ref, ref_loss = got["tensorflow", "float32"]
  want = ref.collected()["probabilities"]
  assert len(want) == n == 872
  labels = np.argmax(want, -1)
  assert 0 < labels.mean() < 1  # both labels predicted: a real check
  for (engine, precision), (scorer, loss) in got.items():
    probabilities = scorer.collected()["probabilities"]
    np.testing.assert_allclose(probabilities, want,
                               **(BF16 if precision == "bfloat16" else FP32))
    assert loss == pytest.approx(ref_loss, rel=1e-5 if precision ==
                                 "float32" else 2e-2)
    np.testing.assert_array_equal(np.argmax(probabilities, -1), labels,
                                  err_msg=f"{engine} {precision}")
    if engine == "openvino":
      assert scorer.get_results() == ref.get_results()


def test_squad_answers_identical(tmp_path):
  from tests.finetuning_data import squad_slice
  squad_slice(os.path.join(SHARED, "squad", "dev-v1.1.json"),
              str(tmp_path / "squad"), questions_dev=40)
  path = random_finetuned(tmp_path / "model", "squadv1",
                          max_query_length=8, max_seq_length=64)
  got, n = predict(path, "squadv1", str(tmp_path / "squad" / "dev.json"),
                   tmp_path, [("tensorflow", "float32"),
                              ("openvino", "float32")], eval_batch_size=8)
  # The engine ran the rows sorted by length, each batch cut to its
  # longest row (the beam's outputs are per row): some batches were.
  predictor = predict.runner.predictor
  (_, step), = predictor._engine_steps.values()  # pylint: disable=W0212
  mask = predictor.data.examples_and_features(
      predict.runner.tasks[0], "predict")[1]["input_mask"]
  mask = mask[np.argsort(mask.sum(axis=1), kind="stable")]
  lengths = {step._trimmed({"input_mask": mask[b:b + 8]})[  # noqa
      "input_mask"].shape[1] for b in range(0, len(mask), 8)}
  assert min(lengths) < mask.shape[1] and len(lengths) > 1, lengths
  files = {}
  for key, (scorer, _) in got.items():
    files[key] = str(tmp_path / f"{key[0]}.json")
    scorer.write_predictions(files[key])
  texts = {k: open(f).read() for k, f in files.items()}
  assert n >= 40 and len(set(texts.values())) == 1, texts


@pytest.mark.parametrize("name,method", [
    ("electric", "electric"), ("script", "script"), ("mlm", "mlm"),
    ("electra", "electra")])
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_pll_within_tolerance(runs, name, method, precision, monkeypatch):
  data_dir, _ = runs
  # Groups of 2 batches in flight: many groups, each with its last batches
  # split across the streams, put back in row order.
  monkeypatch.setattr(scoring_pll, "IN_FLIGHT", 2)
  path = os.path.join(data_dir, "models", name)
  sentences = [s for s in SENTENCES if s]
  want = Scorer.from_run(path, method=method, batch_size=3, top_k=3,
                         inference_engine="tensorflow").score(sentences)
  scorer = Scorer.from_run(path, method=method, batch_size=3, top_k=3,
                           inference_engine="openvino",
                           inference_precision=precision)
  got = scorer.score(sentences)
  assert scorer._engine_steps  # pylint: disable=protected-access
  tol = FP32 if precision == "float32" else (
      BF16_APPENDIX_G if method == "electra" else BF16_PLL)
  for g, w in zip(got, want):
    assert g.token_ids == w.token_ids
    np.testing.assert_allclose(g.token_plls, w.token_plls, **tol)
  print(f"{name} {precision}: max |engine - TensorFlow| per token "
        f"{max(np.abs(g.token_plls - w.token_plls).max() for g, w in zip(got, want)):.2e}")


def test_auto_runs_small_workloads_on_tensorflow():
  from inference.choices import AUTO_MIN_ROWS
  auto = Engine("auto", "float32")
  assert not auto.runs(AUTO_MIN_ROWS - 1) and auto.runs(AUTO_MIN_ROWS)
  assert not Engine("tensorflow").runs(10 ** 9)
  assert Engine("openvino").runs(1)


def test_layer_norm_and_gelu_are_fused():
  """Our encoder's LayerNorms, GELUs and attention become OpenVINO's MVN,
  Gelu and ScaledDotProductAttention (fusions.py), with the padding row's
  mask kept; a pattern that stops matching would leave none."""
  import collections
  import tensorflow as tf
  from inference import openvino_engine
  from model import Encoder
  from model.config import TransformerConfig
  from tests.tiny_runs import MICRO
  config = TransformerConfig(vocab_size=40, **dict(MICRO,
                                                   num_hidden_layers=2))
  encoder = Encoder(config)
  ids = np.random.default_rng(0).integers(5, 40, (3, 9)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 5:] = 0
  want = np.asarray(encoder(ids, mask, ids * 0))

  def forward(batch):
    return encoder(batch["ids"], batch["mask"], batch["ids"] * 0)

  concrete = tf.function(forward).get_concrete_function(
      {k: tf.TensorSpec([None, None], tf.int32, name=k)
       for k in ("ids", "mask")})
  graph_def, _, _ = openvino_engine.frozen_graph(concrete)
  graph = openvino_engine.read_model(graph_def).get_ops()
  ops = collections.Counter(op.get_type_name() for op in graph)
  assert ops["MVN"] == 1 + 2 * 2 and ops["Gelu"] == 2
  assert ops["Erf"] == 0 and ops["ReduceMean"] == 0
  assert ops["ScaledDotProductAttention"] == 2
  assert ops["Einsum"] == ops["Softmax"] == 0
  got = openvino_engine.CompiledFunction(concrete, "float32")(
      {"ids": ids, "mask": mask})
  np.testing.assert_allclose(got, want, **FP32)


def test_savedmodel_export_has_the_engine_model_beside_it(tmp_path):
  """export_model.py --format savedmodel writes openvino/model.xml, whose
  outputs are its ids signature's (fp32)."""
  import openvino as ov
  import tensorflow as tf
  import export_model
  from interop.savedmodel import IDS_SIGNATURE
  path = random_finetuned(tmp_path / "model", "sst")
  export_model.main(["--init-checkpoint", path, "--format", "savedmodel",
                     "--output-dir", str(tmp_path / "out")])
  folder = tmp_path / "out" / "sst"
  serve = tf.saved_model.load(str(folder)).signatures[IDS_SIGNATURE]
  rng = np.random.default_rng(0)
  ids = rng.integers(5, 500, (4, 24)).astype(np.int32)
  mask = (np.arange(24)[None] < np.array([[24], [17], [9], [3]])).astype(
      np.int32)
  feed = dict(input_ids=ids, input_mask=mask, segment_ids=mask * 0)
  want = {k: v.numpy() for k, v in serve(**{k: tf.constant(v) for k, v in
                                             feed.items()}).items()}
  compiled = ov.Core().compile_model(str(folder / "openvino" / "model.xml"),
                                     "CPU",
                                     {"INFERENCE_PRECISION_HINT": "f32"})
  result = compiled.create_infer_request().infer(
      {port.get_any_name(): feed[port.get_any_name().split(":")[0]]
       for port in compiled.inputs})
  got = [np.asarray(v) for v in result.values()]
  floats = [v for v in want.values() if v.dtype == np.float32]
  assert floats
  for value in floats:  # each float output is one of the engine's
    assert any(g.shape == value.shape and
               np.allclose(g, value, rtol=1e-5, atol=1e-5) for g in got)


def test_padding_is_trimmed_per_batch():
  """With trim_by, a batch runs at its longest row's length (rounded up to
  TRIM_MULTIPLE), one compiled model for every length, outputs equal to
  the untrimmed run's."""
  from inference.engine import EngineFunction
  from inference.engine import TRIM_MULTIPLE
  from inference.engine import trimmed_length
  from model import Encoder
  from model.config import TransformerConfig
  from tests.tiny_runs import MICRO
  assert TRIM_MULTIPLE == 1
  mask = np.zeros((2, 40), np.int32)
  mask[0, :9], mask[1, :3] = 1, 1
  assert trimmed_length(mask) == 9
  assert trimmed_length(mask, min_length=20) == 20  # e.g. SQuAD's beam
  assert trimmed_length(np.ones((1, 12)), min_length=20) == 12  # never > T
  encoder = Encoder(TransformerConfig(vocab_size=40, **dict(
      MICRO, num_hidden_layers=2)))

  def forward(batch):  # per row: [CLS]'s vector
    return encoder(batch["ids"], batch["mask"], batch["ids"] * 0)[:, 0]

  trimmed = EngineFunction(forward, "float32", trim_by="mask")
  full = EngineFunction(forward, "float32")
  rng = np.random.default_rng(0)
  for lengths in ([9, 3], [33, 20, 1]):
    mask = (np.arange(40)[None] < np.array(lengths)[:, None]).astype(np.int32)
    batch = {"ids": rng.integers(5, 40, mask.shape).astype(np.int32),
             "mask": mask}
    assert trimmed._trimmed(batch)["ids"].shape[1] == trimmed_length(mask)
    np.testing.assert_allclose(trimmed(batch), full(batch), **FP32)
  assert len(trimmed._compiled) == 1  # pylint: disable=protected-access


def test_map_runs_batches_in_flight_and_yields_them_in_order():
  """map (the Predictor's way: a THROUGHPUT compile, several batches in
  flight) yields each batch's outputs in the batches' order, equal to
  TensorFlow's, across signatures (two dtypes of a feature: two compiled
  models) and with an input passed through to an output."""
  from inference.engine import EngineFunction
  from model import Encoder
  from model.config import TransformerConfig
  from tests.tiny_runs import MICRO
  encoder = Encoder(TransformerConfig(vocab_size=40, **dict(
      MICRO, num_hidden_layers=2)))

  def forward(batch):
    ids = keras.ops.cast(batch["ids"], "int32")
    return {"cls": encoder(ids, batch["mask"], ids * 0)[:, 0],
            "index": batch["index"]}

  encoder(np.ones((1, 4), np.int32), np.ones((1, 4), np.int32))  # builds
  fn = EngineFunction(forward, "float32", trim_by="mask",
                      variables=encoder.variables, throughput=True)
  rng = np.random.default_rng(2)
  batches = []
  for i, lengths in enumerate(([9, 3], [20, 1, 7], [4], [11, 11], [2, 6])):
    mask = (np.arange(24)[None] < np.array(lengths)[:, None]).astype(
        np.int32)
    ids = rng.integers(5, 40, mask.shape)
    batches.append({"ids": ids.astype(np.int64 if i == 2 else np.int32),
                    "mask": mask, "index": np.arange(len(lengths)) + 10 * i})
  got = list(fn.map(iter(batches)))
  assert len(got) == len(batches)
  for batch, out in zip(batches, got):
    ids = batch["ids"].astype(np.int32)
    np.testing.assert_allclose(
        out["cls"], encoder(ids, batch["mask"], ids * 0)[:, 0], **FP32)
    np.testing.assert_array_equal(out["index"], batch["index"])
  assert len(fn._compiled) == 2  # pylint: disable=protected-access


def test_weights_as_constants_and_a_later_trials_rebind():
  """With `variables`, the function is traced statelessly (no variable
  frozen by TensorFlow) and its weights are put in as constants; rebind
  compiles another model's weights of the same shapes into the same trace
  and conversion: outputs equal each model's own TensorFlow forward."""
  from inference.engine import EngineFunction
  from model import Encoder
  from model.config import TransformerConfig
  from tests.tiny_runs import MICRO
  config = TransformerConfig(vocab_size=40, **dict(MICRO,
                                                   num_hidden_layers=2))
  first, second = Encoder(config), Encoder(config)
  rng = np.random.default_rng(1)
  mask = (np.arange(12)[None] < np.array([12, 5, 8])[:, None]).astype(
      np.int32)
  batch = {"ids": rng.integers(5, 40, mask.shape).astype(np.int32),
           "mask": mask}
  for encoder in (first, second):
    encoder(batch["ids"], batch["mask"])  # builds it
  for v in second.trainable_variables:  # other weights, same shapes
    v.assign(rng.normal(0.0, 0.5, tuple(v.shape)).astype(np.float32) +
             float(v.path.endswith("gamma")))

  def forward(batch):
    return first(batch["ids"], batch["mask"], batch["ids"] * 0)

  fn = EngineFunction(forward, "float32", variables=first.variables)
  np.testing.assert_allclose(fn(batch), first(batch["ids"], batch["mask"],
                                              batch["ids"] * 0), **FP32)
  (compiled,) = fn._compiled.values()  # pylint: disable=protected-access
  assert compiled._template is not None  # pylint: disable=protected-access
  fn.rebind(second.variables)
  want = second(batch["ids"], batch["mask"], batch["ids"] * 0)
  assert np.abs(np.asarray(want) - fn(batch)).max() < 1e-5
  assert np.abs(np.asarray(want) - np.asarray(first(
      batch["ids"], batch["mask"], batch["ids"] * 0))).max() > 0.1
  assert fn._fn.experimental_get_tracing_count() == 1  # noqa: SLF001
  with pytest.raises(ValueError, match="traced shapes"):
    fn.rebind(first.variables[:-1])


def test_a_later_trials_model_is_compiled_with_its_own_weights(tmp_path):
  """The Predictor converts once per task and model shape: a later trial's
  model (same shapes, other weights) gets its own weights compiled in."""
  from finetune.model import finetuned_model
  path = random_finetuned(tmp_path / "model", "sst")
  dev = os.path.join(SHARED, "glue", "SST-2", "dev.tsv")
  predict(path, "sst", dev, tmp_path, [("openvino", "float32")])
  runner = predict.runner
  task = runner.tasks[0]
  predictor = runner.predictor
  later = finetuned_model(runner.finetuned, runner.tasks)
  rng = np.random.default_rng(3)
  for v in later.trainable_variables:
    v.assign(v.numpy() + rng.normal(0.0, 0.2, tuple(v.shape)).astype(
        np.float32))
  predictor.call_once(later, task, "predict")
  got = predictor.predict(later, task, "predict")[0].collected()
  assert len(predictor._engine_steps) == 1  # pylint: disable=W0212
  predictor.engine = Engine("tensorflow", "float32")
  want = predictor.predict(later, task, "predict")[0].collected()
  np.testing.assert_allclose(got["probabilities"], want["probabilities"],
                             **FP32)


def _in_own_process(check, **env):
  """Runs this module's function `check` in a fresh process (one whose
  threads, OpenVINO objects and imports no other test shares); asserts
  it passed."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  result = subprocess.run(
      [sys.executable, "-c", f"from tests.test_inference_engine import "
       f"{check}; {check}()"], capture_output=True, text=True, cwd=root,
      env=dict(os.environ, PYTHONPATH=root, **env), timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]


def _micro_encoder():
  """A built 1-layer micro encoder."""
  from model import Encoder
  from model.config import TransformerConfig
  from tests.tiny_runs import MICRO
  encoder = Encoder(TransformerConfig(vocab_size=40, **dict(
      MICRO, num_hidden_layers=1)))
  ids = np.ones((1, 4), np.int32)
  encoder(ids, ids)
  return encoder


def _micro_map_function(encoder):
  """(EngineFunction of the encoder's forward compiled for map, a
  batch)."""
  from inference.engine import EngineFunction

  def forward(batch):
    return encoder(batch["ids"], batch["mask"], batch["ids"] * 0)

  fn = EngineFunction(forward, "float32", variables=encoder.variables,
                      throughput=True)
  ids = np.full((2, 6), 7, np.int32)
  return fn, {"ids": ids, "mask": ids * 0 + 1}


def _exit_check():
  """test_exit_frees_...'s body, in its own process (it frees what other
  tests of this one may hold)."""
  from inference import openvino_engine
  first, second = _micro_encoder(), _micro_encoder()
  fn, batch = _micro_map_function(first)
  outs = fn.map(iter([batch, batch]))
  next(outs), next(outs)  # left at its last yield, as zip leaves it
  inner = outs.gi_yieldfrom  # CompiledFunction.map, under EngineFunction's
  assert not inner.gi_frame.f_locals["in_flight"]  # nothing left running
  fn.rebind(second.variables)
  fn(batch)
  live = list(openvino_engine._LIVE)  # pylint: disable=protected-access
  assert len(live) >= 2
  try:
    openvino_engine._release_all()  # pylint: disable=protected-access
    assert openvino_engine._CORE is None  # pylint: disable=protected-access
    for compiled in live:
      assert compiled._compiled is None  # pylint: disable=protected-access
  finally:
    outs.close()


def test_exit_frees_every_compiled_model_and_the_core_first():
  """The exit hook frees each CompiledFunction (a rebind's too) and the
  Core while the interpreter is whole, not at OpenVINO's static teardown;
  the map generator a caller leaves at its last yield has no request
  running."""
  _in_own_process("_exit_check")


def _threads_check():
  """test_map_runs_no_python_...'s body, in its own process (pytest-xdist's
  threads run Python too)."""
  import gc
  import threading
  fn, batch = _micro_map_function(_micro_encoder())
  collected_on = set()

  def seen(phase, info):
    del phase, info
    collected_on.add(threading.get_ident())
  thresholds = gc.get_threshold()
  gc.callbacks.append(seen)
  gc.set_threshold(1)  # a collection at nearly every allocation
  try:
    for _ in range(3):
      assert len(list(fn.map(iter([batch] * 8)))) == 8
  finally:
    gc.set_threshold(*thresholds)
    gc.callbacks.remove(seen)
  assert collected_on == {threading.main_thread().ident}, collected_on


def test_map_runs_no_python_on_openvino_threads():
  """map waits on its requests itself: no callback runs Python (nor its
  garbage collector, which frees OpenVINO objects) on OpenVINO's threads,
  where an object freed joins its own thread and aborts the process."""
  _in_own_process("_threads_check")


def _telemetry_check():
  """test_openvino_sends_...'s body: imports openvino as the package does."""
  import threading
  from inference import openvino_engine  # noqa: F401
  import openvino  # noqa: F401
  assert threading.enumerate() == [threading.main_thread()]
  assert not os.path.exists(os.path.expanduser(os.path.join("~", "intel")))


def test_openvino_sends_no_telemetry_and_writes_no_home_files(tmp_path):
  """Imported through the package, openvino starts no telemetry sender
  (a thread that forks a process to post a usage event) and writes no
  ~/intel/ (its client id and stats), where its consent checks would."""
  env = {name: "" for name in ("CI", "TF_BUILD", "JENKINS_URL")}
  _in_own_process("_telemetry_check", HOME=str(tmp_path), **env)
