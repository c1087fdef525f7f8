"""Imbalance reports: the report model (``model``: build, JSON, CSV), its HTML and PDF/PNG
renderers (``html``, ``render``) and the one entry point that writes any format (``out``).
"""
