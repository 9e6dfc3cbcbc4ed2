"""Data files shipped with ttsperf (GPU catalog, cloud prices); see README.md here."""
