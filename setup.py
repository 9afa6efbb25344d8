"""ELECTRA-style pretraining of text encoders, rebuilt for TF2 / Keras 3."""

import setuptools

setuptools.setup(
    name="electra-tf2",
    version="0.1.0",
    description=("ELECTRA, Electric and SCRIPT pretraining and fine-tuning "
                 "with Keras 3 on TensorFlow (and JAX for the model code)"),
    python_requires=">=3.11",
    packages=setuptools.find_packages(include=["model", "model.*", "pretrain",
                                               "pretrain.*", "finetune",
                                               "finetune.*", "inference", "scoring",
                                               "scoring.*", "interop",
                                               "interop.*", "loading",
                                               "loading.*", "comparison",
                                               "slot", "training",
                                               "training.*", "dataset",
                                               "dataset.*", "util",
                                               "util.*"]),
    py_modules=["build_pretraining_dataset", "configure_pretraining",
                "run_pretraining", "configure_finetuning", "run_finetuning",
                "run_scoring", "export_model", "run_comparison"],
    install_requires=[
        # tensorflow-text must match TensorFlow's minor version.
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.10",
        "tensorboard>=2.20",  # tf.summary scalars
        "sentencepiece>=0.2",
        "numpy>=1.26",
        "scipy>=1.11",
        "scikit-learn>=1.4",
        "safetensors>=0.4",  # transformers' weight files, read as NumPy
        "matplotlib>=3.7",  # run_comparison.py's plots
        # The inference engine (inference/; docs/performance.md).
        "openvino>=2026.4,<2027",
    ],
    extras_require={
        "scoring": ["jiwer>=3"],  # n-best rescoring WER
        # transformers + CPU torch, and keras-hub: the peers the interop
        # tests check against.
        "test": ["pytest>=8", "pytest-xdist>=3", "jax>=0.4.30",
                 "jaxlib>=0.4.30", "jiwer>=3",
                 "torch==2.13.0", "transformers>=4.40",
                 "keras-hub>=0.32,<1"],
        "keras_hub": ["keras-hub>=0.32,<1"],  # export_model --format keras_hub
    },
)
