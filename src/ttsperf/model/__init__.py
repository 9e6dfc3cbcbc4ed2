"""The ChatTTS architecture in PyTorch: config, GPT, decoder, DVAE, Vocos, tokenizer, weights, pipeline."""

import logging as _logging

# transformers imports torchao at import time when it is installed (ttsperf[int8]); torchao then
# logs one warning per optional CUDA kernel library this machine cannot load, and torch's pytree
# one deprecation per enum torchao registers. Neither is about ttsperf's run: keep them out of
# every command's output (errors still show).
for _name in ("torchao", "torch.utils._pytree"):
    _logging.getLogger(_name).setLevel(_logging.ERROR)
