"""A pretrained discriminator as one self-describing Keras model.

What interop/keras_archive.py saves as a .keras archive: downstream Keras
users load it with `keras.saving.load_model` once this module is imported
(the import registers the class). Only keras / keras.ops here.
"""

import dataclasses

import keras
from keras import ops

from model import DISCRIMINATOR
from model.config import TransformerConfig
from model.encoder import Encoder
from model.heads import DiscriminatorHead


@keras.saving.register_keras_serializable(package="electra")
class Discriminator(keras.Model):
  """ELECTRA's discriminator (or Electric's energy model): encoder + head.

  call({"input_ids", "input_mask", "segment_ids"}: int [B, T]) returns
  {"logits": [B, T] float32, "hidden_states": [B, T, hidden_size]}; the
  logit is ELECTRA's "replaced" logit, or Electric's energy E(x)_t.
  input_mask and segment_ids may be left out (all ones / all zeros).
  """

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    self.config = config
    self.encoder = Encoder(config, name="encoder")
    self.head = DiscriminatorHead(config, name="head")

  def build(self, input_shape=None):
    # The sublayers know their shapes from the config, whatever the input.
    self.encoder.build(None)
    self.head.build(None)
    self.built = True

  def networks(self):
    """As a pretraining model's (interop/weights.py)."""
    return {DISCRIMINATOR: (self.encoder, self.head)}

  def call(self, inputs, training=None):
    hidden = self.encoder(inputs["input_ids"], inputs.get("input_mask"),
                          inputs.get("segment_ids"), training=training)
    return {"logits": ops.cast(self.head(hidden), "float32"),
            "hidden_states": hidden}

  def get_config(self):
    # Written by hand: the base class cannot serialize a TransformerConfig.
    return {"name": self.name, "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "config": dataclasses.asdict(self.config)}

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    transformer = TransformerConfig(**config.pop("config"))
    if "dtype" in config:
      config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
    return cls(transformer, **config)
