"""The live dashboard: the Dash app factory (``factory``), its pages (``pages``: live,
screenshots), its history and live view, the panels, the cluster view, the screenshots page's
parts and the werkzeug server that runs it all (``server``).

Importing the package pulls in nothing; its modules import dash.
"""
