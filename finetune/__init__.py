"""Fine-tuning a pretrained discriminator on GLUE, SQuAD and chunking."""
