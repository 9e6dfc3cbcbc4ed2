"""ttsperf: which GPU, how many, with which settings and at what cost to serve ChatTTS."""

__version__ = "0.1.0"
