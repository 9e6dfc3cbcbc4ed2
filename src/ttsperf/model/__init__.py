"""The ChatTTS architecture in PyTorch: config, GPT, decoder, DVAE, Vocos, tokenizer, weights, pipeline."""
