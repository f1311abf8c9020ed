"""The model of the fleet: the store and its tables, the capacity of nodes and
domains, occupancy, shapes and their slots, history, denominators, demand, the paper's
figures, and the scan engines (DuckDB; Spark when installed). Only the store imports
duckdb. Nothing here imports the inputs, the what-ifs, the API or the outputs.
"""
