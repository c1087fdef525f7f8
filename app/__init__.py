"""app: the Dash dashboard and the ``tealeaves`` command line.

Importing this package pulls in nothing heavy; ``app.dashboard`` imports dash.
"""
