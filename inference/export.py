"""The engine's model beside a SavedModel export: its ids signature
(token ids in, the model's outputs out; tokenization stays in the
SavedModel's serve_text) as OpenVINO IR, OUT/openvino/model.xml + .bin,
float32 weights (the runtime picks bf16 where the CPU has it)."""

import os

import tensorflow as tf

from inference import openvino_engine
from interop.savedmodel import IDS_SIGNATURE

FOLDER = "openvino"


def write_beside(saved_model_dir):
  """Writes saved_model_dir/openvino/model.xml from its ids signature; returns
  the path."""
  import openvino as ov
  loaded = tf.saved_model.load(saved_model_dir)
  graph_def, _, _ = openvino_engine.frozen_graph(
      loaded.signatures[IDS_SIGNATURE])
  model = openvino_engine.read_model(graph_def)
  path = os.path.join(saved_model_dir, FOLDER, "model.xml")
  os.makedirs(os.path.dirname(path), exist_ok=True)
  ov.save_model(model, path, compress_to_fp16=False)
  return path
