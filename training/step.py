"""One optimizer update on a replica, shared by the pretraining and the
fine-tuning drivers: dense gradients, the cross-replica sum, global-norm
clipping, float16's loss scaling and skipping non-finite steps.

Each driver computes its replica's gradients of loss / num_replicas (its
own forward pass and loss) inside `strategy.run`, then calls `apply`.
"""

import keras
import tensorflow as tf


class ReplicaUpdate:
  """Applies one replica's gradients as the update of the global batch."""

  def __init__(self, optimizer, num_replicas, clip_norm=1.0,
               skip_nonfinite=False):
    self.optimizer = optimizer
    self.num_replicas = num_replicas
    self.clip_norm = clip_norm
    self.skip_nonfinite = skip_nonfinite
    self.loss_scaled = isinstance(optimizer, keras.optimizers.LossScaleOptimizer)

  def scale_loss(self, loss):
    """The loss to differentiate: float16's loss scale applied."""
    return self.optimizer.scale_loss(loss) if self.loss_scaled else loss

  def apply(self, grads, variables):
    """Updates `variables`; returns {"grad_norm", "finite"} (float32)."""
    # Embedding lookups give IndexedSlices with repeated rows (a token type
    # appears thousands of times a batch). Keras' Adam squares such slices
    # row by row before summing them, so its second moment comes out far
    # too small; summing into a dense gradient first keeps Adam exact.
    grads = [tf.convert_to_tensor(g) for g in grads]
    if self.num_replicas > 1:
      # Keras sums gradients across replicas only after its own clipping;
      # clip the summed gradient here, then hand it back pre-divided.
      grads = tf.distribute.get_replica_context().all_reduce("sum", grads)
    # float16's gradients carry the loss scale: clip and report them as
    # unscaled (the loss-scale optimizer divides it out, then applies).
    scale = (tf.cast(self.optimizer.dynamic_scale, tf.float32)
             if self.loss_scaled else tf.constant(1.0))
    scaled_norm = tf.linalg.global_norm(grads)
    norm = scaled_norm / scale
    if self.clip_norm > 0:  # a non-finite norm makes every gradient NaN
      grads, _ = tf.clip_by_global_norm(grads, self.clip_norm * scale,
                                        use_norm=scaled_norm)
    if self.num_replicas > 1:
      grads = [g / self.num_replicas for g in grads]
    # The norm is of all-reduced gradients: every replica agrees on it (a
    # non-finite loss anywhere makes it non-finite too).
    finite = tf.math.is_finite(norm)
    if self.skip_nonfinite and not self.loss_scaled:
      self._apply_if(finite, grads, variables)
    else:  # the loss-scale optimizer skips non-finite steps itself
      self.optimizer.apply(grads, variables)
    return {"grad_norm": norm, "finite": tf.cast(finite, tf.float32)}

  def _apply_if(self, finite, grads, variables):
    """Applies the update only when `finite`; a skipped step still counts."""
    optimizer = self.optimizer

    def apply():
      optimizer.apply(grads, variables)
      return tf.constant(True)

    def skip():
      optimizer.iterations.assign_add(1)
      return tf.constant(False)

    if tf.__internal__.distribute.strategy_supports_no_merge_call():
      tf.cond(finite, apply, skip)
      return

    # Mirrored strategies: a cond whose branch calls merge_call (as
    # optimizer.apply does) must run in cross-replica context.
    def cross_replica(strategy, finite, grads):
      first = strategy.experimental_local_results(finite)[0]

      def apply_all():
        strategy.extended.call_for_each_replica(
            optimizer.apply, args=(grads, variables))
        return tf.constant(True)

      tf.cond(first, apply_all, skip)

    tf.distribute.get_replica_context().merge_call(
        cross_replica, args=(finite, grads))
