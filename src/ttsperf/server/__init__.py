"""The HTTP server over the engine: app.py (create_app), schemas, errors, streaming, metrics, run
(uvicorn with a drain on SIGTERM). See README.md, section serve."""
