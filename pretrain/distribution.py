"""tf.distribute strategy, thread and precision settings for the driver."""

import keras
import tensorflow as tf

from util.errors import UserError


def configure_threads(config):
  if config.intra_op_threads:
    tf.config.threading.set_intra_op_parallelism_threads(
        config.intra_op_threads)
  if config.inter_op_threads:
    tf.config.threading.set_inter_op_parallelism_threads(
        config.inter_op_threads)


def get_strategy(config):
  """default | mirrored (local GPUs) | multi_worker (TF_CONFIG) | tpu."""
  name = config.strategy
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
    if config.num_gpus:
      gpus = gpus[:config.num_gpus]
    return tf.distribute.MirroredStrategy(devices=gpus or None)
  if name == "multi_worker":
    return tf.distribute.MultiWorkerMirroredStrategy()
  if name == "tpu":
    try:
      resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
          tpu=config.tpu_name or None, zone=config.tpu_zone or None,
          project=config.gcp_project or None,
          job_name=config.tpu_job_name or None)
      tf.config.experimental_connect_to_cluster(resolver)
      tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError) as e:
      raise UserError(f"cannot reach TPU '{config.tpu_name}': {e}") from None
    return tf.distribute.TPUStrategy(resolver)
  raise UserError(f"unknown strategy '{name}'")


def resolve_precision(config):
  """'auto' = bfloat16 on TPUs and GPUs with native bf16 (sm80+), else fp32."""
  if config.mixed_precision != "auto":
    return config.mixed_precision
  if config.strategy == "tpu":
    return "bfloat16"
  for gpu in tf.config.list_physical_devices("GPU"):
    capability = tf.config.experimental.get_device_details(gpu).get(
        "compute_capability", (0, 0))
    if capability >= (8, 0):
      return "bfloat16"
  return "float32"


def set_precision(precision):
  """Sets the Keras dtype policy; call before building the model."""
  policy = {"float32": "float32", "bfloat16": "mixed_bfloat16",
            "float16": "mixed_float16"}[precision]
  keras.mixed_precision.set_dtype_policy(policy)
  return policy
