"""The live dashboard: the Dash app factory (``factory``), its history and views, the panels,
the cluster view, the screenshots page and the werkzeug server that runs it all (``server``).

Importing the package pulls in nothing; its modules import dash.
"""
