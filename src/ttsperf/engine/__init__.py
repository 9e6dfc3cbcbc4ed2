"""Continuous-batching inference for ChatTTS: one worker thread owns the model and the device.

The scheduler decides, the runner runs (vLLM v1's split):
  engine.py          Engine: the public API and the scheduler's turn (admit, step, events); the worker
                     thread, drain and shutdown; what /healthz says about the engine
  admission.py       the bounded queue; who joins at a step boundary (rows, prefill token budget)
  lengths.py         how long a row runs; why its result says it stopped
  scheduler_rows.py  the scheduler's row table, moved with the runner's compaction
  emission.py        after a step: chunks due, rows finished, rows gone
  replies.py         a request's result or error, counted
  oom.py             the OOM policy (decides; the engine applies)
  faults.py          fault injection, chosen at construction
  runner.py          the KV slots (sized by it), the step, sampling, audio -> StepOutput
  device_batch.py    the persistent batch in tensors on the device, and its host mirror
  decode_step.py     the decode step, eager or compiled; audio.py: hidden states -> audio
  graphs.py          CUDA graphs of the decode step and of the audio call, captured at start

The KV slots and the slot forward it runs live in ttsperf.model (kv.py, forward.py): the one-batch
pipeline uses them too, so the conformance check against the official package covers them."""
