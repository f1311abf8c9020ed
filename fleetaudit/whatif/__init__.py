"""The what-ifs: pure engines over frames of the model (compaction and its
independent ledger replay, compaction over time, placement, reclaim, harvesting and
its compiled replay). They never read the store or print.
"""
