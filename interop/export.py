"""Each format's export of a loaded model, one function per format
(EXPORTERS), and the hidden staging folder every export is written to and
moved into place whole. Loading the run is loading/export.py's (the layer
above). Imports Keras and TensorFlow: the script imports this only after
its flags are checked."""

import contextlib
import os
import shutil
import tempfile

from inference import export as engine_export
from interop import hf
from interop import keras_archive
from interop import keras_hub
from interop import savedmodel
from interop import tf1
from interop.weights import GENERATOR
from interop.weights import export_weights
from util import outputs
from util.errors import UserError


def export_hf(model, pretrain_config, tokenizer, vocab_file, staging, config):
  found = model.networks()
  if not found:
    raise UserError(f"a {pretrain_config.objective} model has no network "
                    "transformers' ELECTRA classes can hold")
  for role, (encoder, head) in found.items():
    hf.save(os.path.join(staging, role), role, export_weights(model, role),
            encoder.config, vocab_file, pretrain_config.do_lower_case,
            pad_id=tokenizer.special_ids.get("pad", 0), with_head=head
            is not None)
    print(f"wrote {os.path.join(config.output_dir, role)} "
          f"({hf.architecture(role, head is not None)})", flush=True)
    if role == "generator" and encoder.config.hidden_act != "gelu":
      print(f"note: transformers' generator head uses the exact GELU, this "
            f"model's {encoder.config.hidden_act}: its logits will differ "
            "slightly", flush=True)
  # A pair's generator that networks() leaves out: two-tower or fixed.
  if hasattr(model, "pair") and "generator" not in found:
    print("note: this model's generator (two-tower or fixed) has no "
          "transformers class and was not exported", flush=True)


def export_keras_hub(model, pretrain_config, tokenizer, vocab_file, staging,
                     config):
  del pretrain_config, config
  mapped, activation = keras_hub.export_preset(
      model, tokenizer, vocab_file, staging,
      log=lambda text: print(text, flush=True))
  encoder = next(iter(model.networks().values()))[0]
  exact = encoder.config.hidden_act == "gelu"
  print(f"checked: keras_hub.models.ElectraBackbone.from_preset loads it; "
        f"its sequence output is within {mapped:.1e} of ours"
        + (" computed with its tanh GELU" if exact else ""), flush=True)
  if exact:
    print(f"note: KerasHub's ElectraBackbone computes the tanh GELU; this "
          f"model was trained with the exact one, which differs by up to "
          f"{activation:.1e} in the sequence output (--init-checkpoint of "
          "this preset restores the exact GELU)", flush=True)


def export_savedmodel(model, pretrain_config, tokenizer, vocab_file, staging,
                      config):
  savedmodel.export_savedmodel(model, pretrain_config, tokenizer, vocab_file,
                               staging, config.max_seq_length or None)
  engine_export.write_beside(staging)  # openvino/model.xml


def export_keras(model, pretrain_config, tokenizer, vocab_file, staging,
                 config):
  del tokenizer, vocab_file, config
  keras_archive.export_keras(model, pretrain_config,
                             os.path.join(staging, "discriminator.keras"))


def export_tf1(model, pretrain_config, tokenizer, vocab_file, staging,
               config):
  """OUT/model.ckpt + checkpoint + vocab.txt in the original release's
  variable names, as its model folders hold them: its run_finetuning.py
  (init_checkpoint) and run_pretraining.py start from it, and so does
  --init-checkpoint here."""
  del tokenizer
  values = tf1.release_weights(model)
  tf1.write_checkpoint(os.path.join(staging, "model.ckpt"), values)
  shutil.copy(vocab_file, os.path.join(staging, "vocab.txt"))
  print(f"wrote {os.path.join(config.output_dir, 'model.ckpt')} "
        f"({len(values)} variables in the release's names)", flush=True)
  if hasattr(model, "pair") and GENERATOR not in model.networks():
    print(f"note: this {pretrain_config.objective} model's generator "
          "(two-tower or fixed) has no place in the release's layout and "
          "was not exported", flush=True)


# --format -> exporter(model, pretrain_config, tokenizer, vocab_file,
# staging folder, ExportConfig); interop/config.py's FORMATS name these.
EXPORTERS = {"hf": export_hf, "savedmodel": export_savedmodel,
             "keras": export_keras, "keras_hub": export_keras_hub,
             "tf1": export_tf1}


@contextlib.contextmanager
def staging_dir(out):
  """A hidden folder beside `out` to export into, moved into place only
  when complete: a failed or interrupted export leaves `out` as it was
  (absent, or the empty folder the user made)."""
  parent = os.path.dirname(os.path.abspath(out))
  try:
    os.makedirs(parent, exist_ok=True)  # validate() checked where it can
    staging = tempfile.mkdtemp(prefix=f".{os.path.basename(out)}.",
                               suffix=".incomplete", dir=parent)
  except OSError as e:
    raise UserError(f"cannot write to {parent}: {e.strerror}") from None
  try:
    yield staging
    outputs.give_usual_modes(staging)
    if os.path.isdir(out):  # the empty folder the user made: fill it
      for name in os.listdir(staging):
        os.replace(os.path.join(staging, name), os.path.join(out, name))
      os.rmdir(staging)
    else:
      os.replace(staging, out)
  except OSError as e:
    raise UserError(f"cannot write {out}: {e.strerror or e}") from None
  finally:
    shutil.rmtree(staging, ignore_errors=True)  # gone when it was moved
