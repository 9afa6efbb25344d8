"""tf.distribute strategy, thread and precision settings for the driver."""

import tensorflow as tf

from util.errors import UserError
from util.machine import cpu_has_bf16


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
  if name == "mirrored":  # local GPUs, else every logical CPU device
    return tf.distribute.MirroredStrategy(devices=mirrored_devices(config))
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


# The one GPU install instruction (setup.py's gpu extra; docs/distributed.md).
GPU_HINT = ("install TensorFlow's GPU build with `.venv/bin/pip install "
            "\".[gpu]\"` (docs/distributed.md)")


def mirrored_devices(config):
  """The devices a mirrored run uses: num_gpus of the local GPUs (0: all);
  with no GPU, the logical CPU devices, when a program has made several
  (tests do). Asking for GPUs that TensorFlow does not see is an error,
  never a silent CPU run."""
  gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
  seen = ", ".join(d.name.replace("/device:", "")
                   for d in tf.config.list_logical_devices())
  if config.num_gpus > len(gpus):
    raise UserError(f"num_gpus {config.num_gpus}: TensorFlow sees "
                    f"{len(gpus)} GPU(s) (devices: {seen}); {GPU_HINT}")
  if gpus:
    return gpus[:config.num_gpus] if config.num_gpus else gpus
  cpus = [d.name for d in tf.config.list_logical_devices("CPU")]
  if len(cpus) < 2:
    raise UserError(f"strategy mirrored: TensorFlow sees no GPU (devices: "
                    f"{seen}); {GPU_HINT}, or leave --strategy at default")
  print(f"note: no GPU; mirrored over {len(cpus)} logical CPU devices",
        flush=True)
  return cpus


def worker_role(strategy):
  """(is_chief, name) of this process; single-process runs are the chief."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or (
      resolver is None or not resolver.task_type):
    return True, "chief"
  task_type, task_id = resolver.task_type, resolver.task_id or 0
  has_chief = "chief" in resolver.cluster_spec().as_dict()
  chief = task_type == "chief" or (task_type == "worker" and task_id == 0 and
                                   not has_chief)
  return chief, f"{task_type}_{task_id}"


def resolve_precision(config):
  """'auto' = bfloat16 where the hardware has it natively: TPUs, GPUs of
  compute capability 8.0+, CPUs with AVX512-BF16/AMX; else float32."""
  if config.mixed_precision != "auto":
    return config.mixed_precision
  if config.strategy == "tpu":
    return "bfloat16"
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    capabilities = [tf.config.experimental.get_device_details(gpu).get(
        "compute_capability", (0, 0)) for gpu in gpus]
    return "bfloat16" if min(capabilities) >= (8, 0) else "float32"
  # (The non-AVX512 kind: fp32 6.85 seq/s, bf16 5.95; issue 15.)
  return "bfloat16" if cpu_has_bf16() else "float32"


