"""Benchmarks of the app room, each a ``main`` that prints figures side by side with the
alternative: the dashboard (``dashboard``), the Prometheus exporter (``prometheus``) and stores
with gaps (``gaps``).  ``tealeaves bench ...`` runs them; every one also runs small in the tests.
"""
