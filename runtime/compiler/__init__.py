"""The recipe compiler: recipe model, placeholders, the one value converter, the recipe
library and tools, and secret masking of values.

Turns JSON recipes and user values into a checked, runnable plan; never starts anything.
Imports `runtime.store` and `runtime.core`.
"""
