"""Continuous-batching inference for ChatTTS: one worker thread owns the model and the device.

The KV slots and the slot forward it runs live in ttsperf.model (kv.py, forward.py): the one-batch
pipeline uses them too, so the conformance check against the official package covers them."""
