"""Data-adaptive algorithms: they take private data and random generators and return releases together
with the certificate to compose into a ledger.

This is the floor above the accountant (``mechanisms`` -> ``conversions`` -> ``accountant`` ->
``accountant.adaptive``): the algorithms certify their private tests with the accountant (e.g. the
composed cost of a PTR test's releases), so they may import everything below, and nothing below imports
them (``tests/test_architecture.py``).  The mechanisms they compose (``GeneralizedPTR``, ``PTRRenyi``,
``GNSSUpperBound``, the selection plug-ins, ...) are ordinary plug-ins in :mod:`mechanisms`.

* :mod:`.ptr` -- generalized propose-test-release: private upper bounds of a data-dependent loss,
  the distance test, classic PTR;
* :mod:`.ptr_binary` -- binary report-noisy-max with generalized PTR;
* :mod:`.ptr_regression` -- private ridge regression by one posterior sample (OPS) with PTR;
* :mod:`.ptr_selection` -- PTR with hyper-parameter selection by random stopping;
* :mod:`.pate_ptr` -- PATE with a GNSS-tested data-dependent RDP;
* :mod:`.per_instance` -- objective perturbation and its privately publishable per-instance reports;
* :mod:`.selection` -- private selection over candidates certified by the accountant.
"""
