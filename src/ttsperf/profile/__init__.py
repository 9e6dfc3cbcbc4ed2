"""In-process measurement of a model on a device -> ModelProfile (see profile/schema.py)."""
