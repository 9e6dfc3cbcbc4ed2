"""Export of the model for other runtimes: the decode step as ONNX (`ttsperf export onnx`)."""
