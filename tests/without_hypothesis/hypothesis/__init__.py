"""Stands in for Hypothesis in the processes the tests start (tests/conftest.py puts this
directory first on their PYTHONPATH): kio imports Hypothesis whenever it is installed, which
made every broker the tests start import it (a third of its start-up CPU), though a broker
installed without the test extras never does."""

raise ImportError("Hypothesis is left out of the processes the tests start")
