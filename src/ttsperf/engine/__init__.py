"""Continuous-batching inference for ChatTTS: one worker thread owns the model and the device."""
