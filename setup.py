"""ELECTRA-style pretraining of text encoders, rebuilt for TF2 / Keras 3.

`pip install .` installs the dependencies; run the scripts from the clone.
"""

import setuptools

setuptools.setup(
    name="electra-tf2",
    version="0.1.0",
    description=("ELECTRA, Electric and SCRIPT pretraining and fine-tuning "
                 "with Keras 3 on TensorFlow (and JAX for the model code)"),
    python_requires=">=3.11",
    # Dependencies only: the code runs from the clone, in the original
    # release's layout (model/, util/, training/, dataset/, ... at the top,
    # found beside the scripts), so an install puts none of those generic
    # names on anyone's path (tests/test_first_use.py).
    packages=[],
    py_modules=[],
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
        "matplotlib>=3.7",  # plots: run_comparison.py, the quickstart
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
                 # transformers' Trainer (benchmarks/finetune_e2e.py)
                 "accelerate>=1.1.0",
                 "keras-hub>=0.32,<1"],
        "keras_hub": ["keras-hub>=0.32,<1"],  # export_model --format keras_hub
        # NVIDIA GPUs (docs/distributed.md): TensorFlow with its CUDA
        # libraries as pip packages; JAX's CUDA 12 build.
        "gpu": ["tensorflow[and-cuda]>=2.21,<2.22"],
        "jax_gpu": ["jax[cuda12]>=0.4.30"],
    },
)
