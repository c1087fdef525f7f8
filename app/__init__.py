"""app: what people use, one room per feature: the ``tealeaves`` command line (``cli``), one
collection session (``session``), the Prometheus exporter (``exporter``), pure figure builders
(``figures``), the Dash dashboard (``dashboard``), imbalance reports (``report``) and the app's
benchmarks (``bench``).

Importing this package pulls in nothing heavy; ``app.dashboard``'s modules import dash.
"""
