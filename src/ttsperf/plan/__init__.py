"""Plan: catalogs, memory model, step-time model, serving simulator, recommender.

Reads profiles and catalogs only; never builds or runs a model.
"""
