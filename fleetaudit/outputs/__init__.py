"""What a user reads: the versioned JSON documents (``contract``), the terminal
(``console``, with the CLI the only rich importer), the HTML report (``report``, the
only jinja2 importer) and its charts.
"""
