"""The inference engine (OpenVINO) under evaluation, prediction, scoring
and the export: engine.py (the choice, the per-signature cache),
openvino_engine.py (conversion from our own tf.function), fusions.py (our
LayerNorm and GELU as OpenVINO's ops), choices.py (the settings, TF-free),
export.py, no_telemetry.py (openvino's usage telemetry declined)."""
