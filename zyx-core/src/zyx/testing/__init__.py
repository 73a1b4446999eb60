"""zyx's backend conformance suite, and the tools it is built from.

Run it against any installed backend::

    pytest --pyargs zyx.testing --zyx-backend NAME     # host, opencl, opencl:1, cuda, ...

The test modules are named by contract area: ``test_pool``, ``test_device``,
``test_dtypes``, ``test_numerics``, ``test_errors``. Reusable pieces:

- :mod:`zyx.testing.kernels`: kernel factories (elementwise ops with their valid input
  domains, casts, a work-group reduction, a tiled matmul, ...);
- :mod:`zyx.testing.numerics`: per-dtype error bounds, poison, random data, comparisons;
- :mod:`zyx.testing.harness`: run a kernel on a device and on the float64 reference;
- :mod:`zyx.testing.examples`: sample kernels with their launch arguments (what
  ``zyx check`` runs).

Importing this package is cheap: the pytest plugin (:mod:`zyx.testing.plugin`) loads it
in every pytest run.
"""
