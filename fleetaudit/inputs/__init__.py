"""What comes into the store: ``ingest`` (one module per input format, one
transaction per call) and the synthetic fleets of ``fleetaudit generate`` (one module
per format), with the ASI trace's column lists that both share.
"""
