"""Foundation: errors, configuration, ids and clocks, OS process identity, fault points.

Knows nothing of the state root or of runs. Imports only the standard library.
"""
