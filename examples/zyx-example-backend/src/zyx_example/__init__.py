"""zyx-example-backend: a complete zyx backend outside the zyx repository, to copy from.

numpy on the CPU; kernels are rendered from zyx's IR to vectorized Python. See
``docs/writing-a-backend.md`` in the zyx repository for the walk-through.
"""

__version__ = "0.1.0"
