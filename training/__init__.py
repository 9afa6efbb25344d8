"""The pieces pretraining and fine-tuning share: tf.distribute strategies,
threads and mixed precision (`distribution`), optimizers and the warmup +
polynomial-decay learning-rate schedule (`optimization`), checkpoints that
name every variable by its Keras path (`checkpointing`), and progress lines
with rate and ETA (`progress`). Nothing here imports from `pretrain` or
`finetune`: both build on it."""
