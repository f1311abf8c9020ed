"""The small core every layer uses: errors, the commands' options and defaults, times,
package data, files, processes and the compiled-code cache. Standard library (and
polars for times) only; nothing here imports another layer of fleetaudit.
"""
